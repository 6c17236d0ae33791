package jobsetpolicy

import (
	"testing"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
)

func TestMatcher(t *testing.T) {
	ci := &policies.UserInfo{Username: "system:serviceaccount:ci:deployer", Groups: []string{"system:serviceaccounts"}}
	alice := &policies.UserInfo{Username: "alice", Groups: []string{"ml"}}
	create := func(u *policies.UserInfo, ns string) policies.Input {
		return policies.Input{Operation: "CREATE", Namespace: ns, UserInfo: u}
	}
	update := func(u *policies.UserInfo) policies.Input {
		return policies.Input{Operation: "UPDATE", Namespace: "ml", UserInfo: u}
	}
	audit := policies.Input{Operation: policies.OperationAudit, Namespace: "ml"}
	cases := map[string]struct {
		match   *policyv1alpha1.Match
		exclude *policyv1alpha1.Exclude
		in      policies.Input
		want    bool
	}{
		"operation matched":                      {match: &policyv1alpha1.Match{Operations: []policyv1alpha1.Operation{"CREATE"}}, in: create(alice, "ml"), want: true},
		"operation not matched":                  {match: &policyv1alpha1.Match{Operations: []policyv1alpha1.Operation{"CREATE"}}, in: update(alice), want: false},
		"the audit ignores operations":           {match: &policyv1alpha1.Match{Operations: []policyv1alpha1.Operation{"CREATE"}}, in: audit, want: true},
		"user by name":                           {match: &policyv1alpha1.Match{Users: []string{"alice"}}, in: create(alice, "ml"), want: true},
		"user by group":                          {match: &policyv1alpha1.Match{Groups: []string{"ml"}}, in: create(alice, "ml"), want: true},
		"another user":                           {match: &policyv1alpha1.Match{Users: []string{"bob"}}, in: create(alice, "ml"), want: false},
		"a policy for some users is not audited": {match: &policyv1alpha1.Match{Users: []string{"alice"}}, in: audit, want: false},
		"excluded user by glob":                  {exclude: &policyv1alpha1.Exclude{Users: []string{"system:serviceaccount:ci:*"}}, in: create(ci, "ml"), want: false},
		"excluded group":                         {exclude: &policyv1alpha1.Exclude{Groups: []string{"system:serviceaccounts"}}, in: create(ci, "ml"), want: false},
		"not excluded":                           {exclude: &policyv1alpha1.Exclude{Users: []string{"system:serviceaccount:ci:*"}}, in: create(alice, "ml"), want: true},
		"the audit reports excluded users'":      {exclude: &policyv1alpha1.Exclude{Users: []string{"system:serviceaccount:ci:*"}}, in: audit, want: true},
		"excluded namespace":                     {exclude: &policyv1alpha1.Exclude{Namespaces: []string{"kube-*"}}, in: create(alice, "kube-system"), want: false},
		"the audit skips excluded namespaces":    {exclude: &policyv1alpha1.Exclude{Namespaces: []string{"ml"}}, in: audit, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := matcher(tc.match, tc.exclude, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := m == nil || m(tc.in); got != tc.want {
				t.Errorf("matches %v, want %v", got, tc.want)
			}
		})
	}
}
