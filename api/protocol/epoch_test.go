package protocol

import (
	"math"
	"strconv"
	"testing"
)

func TestParseEpoch(t *testing.T) {
	for _, tc := range []struct {
		value    string
		fromZero bool
		want     int32
		wantErr  bool
	}{
		{value: "0", want: 0},
		{value: "7", want: 7},
		{value: "7", fromZero: true, want: 8},
		{value: "0", fromZero: true, want: 1},
		{value: strconv.Itoa(math.MaxInt32), want: math.MaxInt32},
		{value: strconv.Itoa(math.MaxInt32), fromZero: true, wantErr: true},
		{value: "2147483648", wantErr: true},
		{value: "-1", wantErr: true},
		{value: "", wantErr: true},
		{value: "x", wantErr: true},
		{value: " 1", wantErr: true},
	} {
		got, err := ParseEpoch(tc.value, tc.fromZero)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseEpoch(%q, %v) = %d, %v; want %d, error %v", tc.value, tc.fromZero, got, err, tc.want, tc.wantErr)
		}
	}
}
