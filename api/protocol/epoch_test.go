package protocol

import (
	"math"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
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
		parse := ParseEpoch
		if tc.fromZero {
			parse = ParseAttempt
		}
		epoch, err := parse(tc.value)
		got := int32(epoch)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseEpoch(%q, %v) = %d, %v; want %d, error %v", tc.value, tc.fromZero, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestEpochAttempt(t *testing.T) {
	cases := map[string]struct {
		epoch       Epoch
		wantAttempt *int32
	}{
		"none":         {epoch: 0, wantAttempt: nil},
		"the first":    {epoch: 1, wantAttempt: at(0)},
		"a later one":  {epoch: 4, wantAttempt: at(3)},
		"the greatest": {epoch: math.MaxInt32, wantAttempt: at(math.MaxInt32 - 1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantAttempt, tc.epoch.Attempt()); diff != "" {
				t.Errorf("Epoch(%d).Attempt() (-want +got):\n%s", tc.epoch, diff)
			}
			if got := EpochOfAttempt(tc.epoch.Attempt()); got != tc.epoch {
				t.Errorf("EpochOfAttempt(Epoch(%d).Attempt()) = %d, want it back", tc.epoch, got)
			}
		})
	}
}

func TestEpochOfAttempt(t *testing.T) {
	cases := map[string]struct {
		attempt *int32
		want    Epoch
	}{
		"unset":       {attempt: nil, want: 0},
		"the first":   {attempt: at(0), want: 1},
		"a later one": {attempt: at(3), want: 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := EpochOfAttempt(tc.attempt); got != tc.want {
				t.Errorf("EpochOfAttempt = %d, want %d", got, tc.want)
			}
			if diff := cmp.Diff(tc.attempt, tc.want.Attempt()); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEpochOfAttemptNumber(t *testing.T) {
	cases := map[string]struct {
		attempt int64
		want    Epoch
		wantErr bool
	}{
		"the first":             {attempt: 0, want: 1},
		"a later one":           {attempt: 3, want: 4},
		"the greatest":          {attempt: math.MaxInt32 - 1, want: math.MaxInt32},
		"negative":              {attempt: -1, wantErr: true},
		"whose epoch overflows": {attempt: math.MaxInt32, wantErr: true},
		"beyond int32":          {attempt: math.MaxInt32 + 1, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := EpochOfAttemptNumber(tc.attempt)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("EpochOfAttemptNumber(%d) = %d, %v; want %d, error %v", tc.attempt, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestEpochText checks that what String and AttemptString write is what
// ParseEpoch and ParseAttempt read back, and that the two differ by one.
func TestEpochText(t *testing.T) {
	cases := map[string]struct {
		epoch       Epoch
		wantEpoch   string
		wantAttempt string
	}{
		"the first":    {epoch: 1, wantEpoch: "1", wantAttempt: "0"},
		"a later one":  {epoch: 12, wantEpoch: "12", wantAttempt: "11"},
		"the greatest": {epoch: math.MaxInt32, wantEpoch: "2147483647", wantAttempt: "2147483646"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.epoch.String(); got != tc.wantEpoch {
				t.Errorf("String() = %q, want %q", got, tc.wantEpoch)
			}
			if got := tc.epoch.AttemptString(); got != tc.wantAttempt {
				t.Errorf("AttemptString() = %q, want %q", got, tc.wantAttempt)
			}
			if got, err := ParseEpoch(tc.epoch.String()); err != nil || got != tc.epoch {
				t.Errorf("ParseEpoch(String()) = %d, %v; want %d", got, err, tc.epoch)
			}
			if got, err := ParseAttempt(tc.epoch.AttemptString()); err != nil || got != tc.epoch {
				t.Errorf("ParseAttempt(AttemptString()) = %d, %v; want %d", got, err, tc.epoch)
			}
		})
	}
	if got := Epoch(0).String(); got != "0" {
		t.Errorf("Epoch(0).String() = %q, want %q: no epoch", got, "0")
	}
	for _, value := range []string{"-1", "", "1.0", "0x1", "1 ", "2147483648"} {
		if got, err := ParseEpoch(value); err == nil {
			t.Errorf("ParseEpoch(%q) = %d, want an error", value, got)
		}
		if got, err := ParseAttempt(value); err == nil {
			t.Errorf("ParseAttempt(%q) = %d, want an error", value, got)
		}
	}
}

func at(n int32) *int32 { return &n }
