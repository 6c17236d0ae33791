package simnode

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// containerEnv is a container's environment as the kubelet makes it each
// time it starts the container (kubelet_pods.go, makeEnvironmentVariables
// and podFieldSelectorRuntimeValue): literal values, and Downward API field
// references read from the node's copy of the Pod at that moment. An
// annotation or label the Pod lacks is an empty variable, not a missing
// one. The agent's epoch (POD_EPOCH) comes this way, so the simulation must
// take the Pod as the node has it when the agent starts again, not as it
// was first seen.
//
// Not simulated: $(VAR) expansion; resourceFieldRef, ConfigMap, Secret
// and file references (left out); status.hostIP(s) (empty: the simulated
// nodes have no address).
func containerEnv(pod *corev1.Pod, c *corev1.Container, podIP string) (map[string]string, error) {
	env := make(map[string]string, len(c.Env))
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			v, err := podField(pod, e.ValueFrom.FieldRef.FieldPath, podIP)
			if err != nil {
				return nil, fmt.Errorf("env %s of container %s: %w", e.Name, c.Name, err)
			}
			env[e.Name] = v
		default:
			// Not simulated (see above): left out rather than failing the
			// container, since no simulated program reads one.
		}
	}
	return env, nil
}

// podField is the value of a Downward API field path of the Pod.
func podField(pod *corev1.Pod, path, podIP string) (string, error) {
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return "", nil
	case "status.podIP", "status.podIPs":
		// The kubelet gives the sandbox's address, which the API may not
		// show yet.
		return podIP, nil
	}
	return "", fmt.Errorf("field path %q is not simulated", path)
}

// subscript returns key of "<field>['<key>']".
func subscript(path, field string) (string, bool) {
	rest, ok := strings.CutPrefix(path, field+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}
