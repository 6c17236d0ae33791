package deploy

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/inplace-dev/inplace/controller/coexist"
	testdeploy "github.com/inplace-dev/inplace/test/deploy"
)

// TestManagerRBACIsLeastPrivilege reads the Roles of config/rbac and
// config/selfsigned: no wildcards, no Secrets, no verbs that grant more
// than the role holds, Leases only in the manager's namespace, and the
// admission server writes nothing but Events, its policies' status, the
// audit's PolicyReports and, without cert-manager, its own webhook
// configurations. That the rules are
// enough, and no more than the code uses, is shown by the e2e suite, which
// runs the managers with them and compares their calls with the rules.
func TestManagerRBACIsLeastPrivilege(t *testing.T) {
	objs, err := testdeploy.Objects("config/rbac/role.yaml", "config/rbac/webhook_role.yaml", "config/selfsigned/cabundle_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 5 {
		t.Fatalf("want the ClusterRole and Role of each Deployment and the CA writer's ClusterRole, got %d objects", len(objs))
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
			// The one exception: the controller reads and watches upstream
			// JobSet's Leases, by name, in a namespace that is
			// configurable and may not exist (controller/upstream_gate.go,
			// controller/upstream_watch.go: a watch narrowed to one name
			// is authorized against resourceNames).
			readByName := []string{"get", "list", "watch"}
			upstreamLeases := u.GetName() == "inplace-manager" && slices.Equal(rule.Verbs, readByName) && slices.Equal(rule.ResourceNames, coexist.UpstreamLeaseNames)
			if u.GetKind() == "ClusterRole" && slices.Contains(rule.Resources, "leases") && !upstreamLeases {
				t.Errorf("ClusterRole %s: Leases belong in the namespaced Role, but for reads of upstream JobSet's by name: %v", u.GetName(), rule)
			}
			if slices.Contains(rule.Resources, "customresourcedefinitions") && (!slices.Equal(rule.Verbs, readByName) || !slices.Equal(rule.ResourceNames, []string{coexist.CRDName})) {
				t.Errorf("%s %s: CustomResourceDefinitions only read, and only the JobSet's by name: %v", u.GetKind(), u.GetName(), rule)
			}
			if (slices.Contains(rule.Resources, "mutatingwebhookconfigurations") || slices.Contains(rule.Resources, "validatingwebhookconfigurations")) && (len(rule.ResourceNames) == 0 || u.GetName() != "inplace-webhook-cabundle") {
				t.Errorf("ClusterRole %s: webhook configurations only by name, and only in the role an install without cert-manager binds: %v", u.GetName(), rule)
			}
			if u.GetName() == "inplace-webhook" && u.GetKind() == "ClusterRole" {
				for _, res := range rule.Resources {
					writable := res == "events" || res == "jobsetpolicies/status" || res == "policyreports" && slices.Equal(rule.APIGroups, []string{"wgpolicyk8s.io"})
					for _, verb := range rule.Verbs {
						if !writable && !slices.Contains([]string{"get", "list", "watch"}, verb) && !slices.Contains(rule.APIGroups, "authentication.k8s.io") && !slices.Contains(rule.APIGroups, "authorization.k8s.io") {
							t.Errorf("ClusterRole inplace-webhook: the admission server writes no %s: %v", res, rule)
						}
					}
				}
			}
		}
	}
}
