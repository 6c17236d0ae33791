// Package inventorysync keeps a policy engine's data.inventory in step
// with the cluster: an informer per configured kind, from the manager's
// cache, writes each object into the inventory as it changes. The
// policies then read other objects (a namespace's labels, the JobSets a
// team runs, a LocalQueue) without a call to the apiserver on the
// admission path.
package inventorysync
