package coexist

import (
	"reflect"
	"strings"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// The API server takes up a replaced CRD's schema a moment after the
// write: until then it decodes every request and every stored object of
// the kind with the schema it had, and prunes what that schema lacks. A
// CRD that keeps our status fields (InspectCRD) is therefore not yet
// proof that a status written now keeps them. A dry-run status write
// is: the API server answers with the object as it would store it.

// ServedProbe is the status a dry-run write sends to see whether the API
// server keeps the status counters: s with each of them (every int32
// field of the status, the epochs and inPlaceRestarts among them) moved on
// by one, so that each is set, a zero being omitted from the request,
// and none is out of the schema's bounds.
func ServedProbe(s jobset.JobSetStatus) jobset.JobSetStatus {
	v := reflect.ValueOf(&s).Elem()
	for _, f := range counters() {
		c := v.FieldByIndex(f.Index)
		c.SetInt(c.Int() + 1)
	}
	return s
}

// Dropped lists, as status.<field>, the counters of the probe sent that
// the API server's answer lacks or changed.
func Dropped(sent, answer jobset.JobSetStatus) []string {
	s, a := reflect.ValueOf(sent), reflect.ValueOf(answer)
	var out []string
	for _, f := range counters() {
		if s.FieldByIndex(f.Index).Int() != a.FieldByIndex(f.Index).Int() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			out = append(out, "status."+name)
		}
	}
	return out
}

// counters are the int32 fields of JobSetStatus.
func counters() []reflect.StructField {
	var out []reflect.StructField
	for f := range reflect.TypeFor[jobset.JobSetStatus]().Fields() {
		if f.Type.Kind() == reflect.Int32 {
			out = append(out, f)
		}
	}
	return out
}
