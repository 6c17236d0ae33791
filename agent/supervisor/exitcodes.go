package supervisor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ExitCodes is the set of a worker's exit codes that restart in place, as
// the worker container's restart rule writes it: "In:1,2" or "NotIn:0,42".
// A code outside it ends the container with that code.
type ExitCodes struct {
	NotIn  bool
	Values []int
}

// Matches reports whether code restarts in place.
func (e ExitCodes) Matches(code int) bool {
	return slices.Contains(e.Values, code) != e.NotIn
}

func (e ExitCodes) String() string {
	op := "In"
	if e.NotIn {
		op = "NotIn"
	}
	vals := make([]string, len(e.Values))
	for i, v := range e.Values {
		vals[i] = strconv.Itoa(v)
	}
	return op + ":" + strings.Join(vals, ",")
}

// ParseExitCodes parses ExitCodes.String's form.
func ParseExitCodes(s string) (ExitCodes, error) {
	op, list, ok := strings.Cut(s, ":")
	var e ExitCodes
	switch {
	case !ok:
		return e, fmt.Errorf("%q: want In:<codes> or NotIn:<codes>", s)
	case op == "NotIn":
		e.NotIn = true
	case op != "In":
		return e, fmt.Errorf("%q: the operator must be In or NotIn", s)
	}
	if list == "" {
		return e, nil
	}
	for _, v := range strings.Split(list, ",") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 255 {
			return e, fmt.Errorf("%q: %q is not an exit code (0 to 255)", s, v)
		}
		e.Values = append(e.Values, n)
	}
	return e, nil
}
