package controller

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// AgentRoleName names the Role and RoleBinding that let the agents of a
// namespace read the broadcast ConfigMaps of the namespace's InPlaceRestart
// JobSets, by name (an agent watches its own with a field selector on its
// name, which the API server authorizes against resourceNames). The
// RoleBinding AgentPodsBindingName binds the same service accounts to the
// ClusterRole AgentPodsClusterRole of config/agent: read and patch Pods.
//
// The RoleBinding of that name is also the parameter of the
// ValidatingAdmissionPolicy of config/agent: every service account it names
// may change, in its namespace, nothing on Pods but the epoch annotation of
// its own Pod, upwards, with a token bound to that Pod, whatever else it was
// granted. Its subjects are therefore only ever added for InPlaceRestart
// JobSets' Pods, and the name must not change.
const AgentRoleName = "inplace-agent"

// AgentPodsClusterRole is the agents' ClusterRole of config/agent (Pods:
// get, patch), and AgentPodsBindingName the RoleBinding to it in each
// namespace. The controller binds it with the verb bind on it alone, so
// that it need not be able to patch every Pod of the cluster itself.
const (
	AgentPodsClusterRole = "inplace-agent-pods"
	AgentPodsBindingName = "inplace-agent-pods"
)

// ManagedByLabel marks the RBAC objects the controller manages.
const ManagedByLabel = "app.kubernetes.io/managed-by"

func agentRole(namespace string, broadcasts []string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: AgentRoleName, Namespace: namespace, Labels: map[string]string{ManagedByLabel: "inplace"}},
		Rules:      agentRules(broadcasts),
	}
}

// agentRules let an agent watch its JobSet's broadcast, by name: the one
// call it makes on ConfigMaps (a watch from the API server's cache, with a
// field selector on the name, never a get or a list).
func agentRules(broadcasts []string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"watch"}, ResourceNames: broadcasts},
	}
}

// agentSubjects are the service accounts the Pods of an InPlaceRestart
// JobSet run as.
func agentSubjects(js *jobset.JobSet) []rbacv1.Subject {
	var out []rbacv1.Subject
	for _, rj := range js.Spec.ReplicatedJobs {
		sa := rj.Template.Spec.Template.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		s := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: js.Namespace}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// withSubjects returns the binding's subjects plus the missing ones.
func withSubjects(have, want []rbacv1.Subject) []rbacv1.Subject {
	out := slices.Clone(have)
	for _, s := range want {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// agentGrants are the broadcasts and service accounts the agents' Role and
// RoleBinding of a namespace must name for the JobSets of that namespace:
// those of every InPlaceRestart JobSet not being deleted and not opted out
// (disable-in-place-restart: no agent reports), sorted.
func agentGrants(jobSets []jobset.JobSet) ([]string, []rbacv1.Subject) {
	var broadcasts []string
	var subjects []rbacv1.Subject
	for i := range jobSets {
		js := &jobSets[i]
		if js.DeletionTimestamp != nil || !jobset.InPlaceActive(js) {
			continue
		}
		broadcasts = append(broadcasts, protocol.BroadcastName(js.Name))
		subjects = withSubjects(subjects, agentSubjects(js))
	}
	slices.Sort(broadcasts)
	slices.SortFunc(subjects, func(a, b rbacv1.Subject) int { return strings.Compare(a.Name, b.Name) })
	return broadcasts, subjects
}
