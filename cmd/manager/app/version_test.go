package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/cmd/internal/version"
)

func TestVersionHandler(t *testing.T) {
	rec := httptest.NewRecorder()
	VersionHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/version", nil))
	var got version.Info
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %q: %v", rec.Code, rec.Body, err)
	}
	if got != version.Get() {
		t.Errorf("/version = %+v, want %+v", got, version.Get())
	}
	rec = httptest.NewRecorder()
	VersionHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/version", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /version: status %d", rec.Code)
	}
}

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := RegisterBuildInfo(reg); err != nil {
		t.Fatal(err)
	}
	if err := RegisterBuildInfo(reg); err != nil {
		t.Errorf("registering it again on the same registry: %v", err)
	}
	n, err := testutil.GatherAndCount(reg, "inplace_build_info")
	if err != nil || n != 1 {
		t.Errorf("inplace_build_info series: %d, %v; want 1", n, err)
	}
}

func TestOptionsServeVersionBesideMetrics(t *testing.T) {
	cfg, err := configv1alpha1.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Options(cfg, NewScheme()).Metrics.ExtraHandlers["/version"]; !ok {
		t.Error("the metrics server does not serve /version")
	}
}
