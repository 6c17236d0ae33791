package app

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inplace-dev/inplace/cmd/internal/version"
)

// VersionHandler answers GET /version with the build as JSON.
func VersionHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(version.Get())
	})
}

// RegisterBuildInfo registers inplace_build_info, 1 with the build as its
// labels, as Kubernetes components publish theirs: a dashboard or an alert
// tells which version runs where. The process registers it once (main),
// not Setup: the managers of one process would each publish the same
// series. Registering it again is no error.
func RegisterBuildInfo(reg prometheus.Registerer) error {
	info := version.Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "inplace_build_info",
		Help: "The build of the running inplace-manager: 1, labelled with its version, commit and Go version.",
	}, []string{"version", "commit", "go_version"})
	g.WithLabelValues(info.Version, info.Commit, info.GoVersion).Set(1)
	if err := reg.Register(g); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return err
	}
	return nil
}
