package deploy

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	testdeploy "github.com/inplace-dev/inplace/test/deploy"
)

// TestManagerRBACIsLeastPrivilege reads the Roles of config/rbac: no
// wildcards, no Secrets, no verbs that grant more than the role holds, and
// Leases only in the manager's namespace. That the rules are enough is
// shown by the suites that run the manager with them.
func TestManagerRBACIsLeastPrivilege(t *testing.T) {
	objs, err := testdeploy.Objects("config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("config/rbac/role.yaml holds no role")
	}
	for _, u := range objs {
		var rules []rbacv1.PolicyRule
		switch u.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				t.Fatal(err)
			}
			rules = r.Rules
		case "Role":
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				t.Fatal(err)
			}
			if r.Namespace != testdeploy.ManagerNamespace {
				t.Errorf("Role %s is in namespace %q, want the manager's", r.Name, r.Namespace)
			}
			rules = r.Rules
		default:
			t.Fatalf("unexpected %s in role.yaml", u.GetKind())
		}
		for _, rule := range rules {
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
				if slices.Contains(list, "*") {
					t.Errorf("%s %s: wildcard in %v", u.GetKind(), u.GetName(), rule)
				}
			}
			for _, verb := range []string{"escalate", "bind", "impersonate"} {
				onlyTheAgentsClusterRole := verb == "bind" && slices.Equal(rule.ResourceNames, []string{"inplace-agent-pods"})
				if slices.Contains(rule.Verbs, verb) && !onlyTheAgentsClusterRole {
					t.Errorf("%s %s: verb %s in %v (bind only on the agents' ClusterRole, by name)", u.GetKind(), u.GetName(), verb, rule)
				}
			}
			if slices.Contains(rule.Resources, "pods") && slices.Contains(rule.Verbs, "patch") {
				t.Errorf("%s %s: the manager patches no Pod; it binds the agents' ClusterRole instead of holding its rights: %v", u.GetKind(), u.GetName(), rule)
			}
			if slices.Contains(rule.Resources, "secrets") {
				t.Errorf("%s %s: the manager reads no Secrets: %v", u.GetKind(), u.GetName(), rule)
			}
			if u.GetKind() == "ClusterRole" && slices.Contains(rule.Resources, "leases") {
				t.Errorf("ClusterRole %s: Leases belong in the namespaced Role", u.GetName())
			}
			if slices.Contains(rule.Resources, "mutatingwebhookconfigurations") && len(rule.ResourceNames) == 0 {
				t.Errorf("ClusterRole %s: webhook configurations only by name: %v", u.GetName(), rule)
			}
		}
	}
}
