package util

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// AuditFlags make the apiserver write, to dir/audit.log, one line per
// request that the users of groups send (a watch as it begins, any other
// request as it completes), without bodies: who sent it, its verb, its
// object, its response code and the authorizer's decision.
func AuditFlags(dir string, groups ...string) (map[string]string, error) {
	policy := auditv1.Policy{
		OmitStages: []auditv1.Stage{auditv1.StageRequestReceived},
		Rules: []auditv1.PolicyRule{
			{Level: auditv1.LevelMetadata, UserGroups: groups},
			{Level: auditv1.LevelNone},
		},
	}
	policy.APIVersion, policy.Kind = auditv1.SchemeGroupVersion.String(), "Policy"
	data, err := yaml.Marshal(policy)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	return map[string]string{
		"audit-policy-file": path,
		"audit-log-path":    AuditLog(dir),
		"audit-log-format":  "json",
		"audit-log-maxsize": "0",
		// Each request is written before its response is sent, so a
		// request that returned is in the log.
		"audit-log-mode": "blocking",
	}, nil
}

// AuditLog is where AuditFlags make the apiserver write.
func AuditLog(dir string) string { return filepath.Join(dir, "audit.log") }

// Call is one API request as the audit log recorded it.
type Call struct {
	User        string
	Verb        string
	APIGroup    string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	Code        int32
	// Received is when the apiserver received the call.
	Received time.Time
	// Denied is set when authorization refused the call (not admission,
	// nor a namespace being deleted, which also answer 403).
	Denied bool
}

func (c Call) String() string {
	res := c.Resource
	if c.Subresource != "" {
		res += "/" + c.Subresource
	}
	if c.APIGroup != "" {
		res += "." + c.APIGroup
	}
	return fmt.Sprintf("%s %s %s %s/%s: %d", c.Received.Format("15:04:05.000"), c.User, c.Verb, res, c.Name, c.Code)
}

// ReadCalls reads the resource requests of an audit log.
func ReadCalls(path string) ([]Call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var calls []Call
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(scanner.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		stage := auditv1.StageResponseComplete
		if ev.Verb == "watch" {
			stage = auditv1.StageResponseStarted
		}
		if ev.Stage != stage || ev.ObjectRef == nil {
			continue
		}
		c := Call{
			User: ev.User.Username, Verb: ev.Verb,
			APIGroup: ev.ObjectRef.APIGroup, Resource: ev.ObjectRef.Resource, Subresource: ev.ObjectRef.Subresource,
			Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name,
			Received: ev.RequestReceivedTimestamp.Time,
		}
		if ev.ResponseStatus != nil {
			c.Code = ev.ResponseStatus.Code
		}
		c.Denied = ev.Annotations["authorization.k8s.io/decision"] == "forbid"
		calls = append(calls, c)
	}
	return calls, scanner.Err()
}

// Right is one verb on one resource (and subresource) of one API group,
// on one object if Name is set: the unit a Role grants.
type Right struct {
	APIGroup, Resource, Verb, Name string
}

func (r Right) String() string {
	s := r.Verb + " " + r.Resource
	if r.APIGroup != "" {
		s += "." + r.APIGroup
	}
	if r.Name != "" {
		s += "/" + r.Name
	}
	return s
}

// Rights expands rules into the rights they grant. Wildcards and
// non-resource URLs are not expanded: the Roles checked hold none.
func Rights(rules []rbacv1.PolicyRule) []Right {
	var rights []Right
	for _, rule := range rules {
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					for _, n := range names {
						rights = append(rights, Right{APIGroup: g, Resource: res, Verb: v, Name: n})
					}
				}
			}
		}
	}
	return rights
}

// Uses says whether the call exercised the right.
func (r Right) Uses(c Call) bool {
	res := c.Resource
	if c.Subresource != "" {
		res += "/" + c.Subresource
	}
	return r.APIGroup == c.APIGroup && r.Resource == res && r.Verb == c.Verb && (r.Name == "" || r.Name == c.Name)
}

// UnusedRights returns the rights that none of calls exercised, sorted.
func UnusedRights(rights []Right, calls []Call) []string {
	var unused []string
	for _, r := range rights {
		if !slices.ContainsFunc(calls, r.Uses) {
			unused = append(unused, r.String())
		}
	}
	slices.Sort(unused)
	return slices.Compact(unused)
}

// Denied returns the calls authorization refused, as strings, sorted.
func Denied(calls []Call) []string {
	var denied []string
	for _, c := range calls {
		if c.Denied {
			denied = append(denied, c.String())
		}
	}
	slices.Sort(denied)
	return slices.Compact(denied)
}

// CallsOf returns the calls the users sent whose names begin with prefix.
func CallsOf(calls []Call, prefix string) []Call {
	var of []Call
	for _, c := range calls {
		if strings.HasPrefix(c.User, prefix) {
			of = append(of, c)
		}
	}
	return of
}
