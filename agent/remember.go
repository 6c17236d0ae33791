package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/inplace-dev/inplace/api/protocol"
)

// EndpointMemory keeps the report endpoint the broadcast last named
// across restarts of the agent's container, on a volume of the Pod's
// life: an agent that starts again in a Pod restarted in place reads the
// broadcast from that endpoint (DirectTransport.Broadcasts) instead of
// opening a watch, and an in-place restart of N Pods costs the API server
// no request per agent.
type EndpointMemory interface {
	// Recall returns the endpoint remembered, if any.
	Recall() (protocol.ReportEndpoint, bool)
	// Remember keeps ep; the zero endpoint forgets.
	Remember(ep protocol.ReportEndpoint) error
}

// EndpointFile is an EndpointMemory in a file: the webhook mounts an
// emptyDir into the agent alone (protocol.AgentStateDir), which the
// kubelet keeps while the Pod's containers restart.
type EndpointFile string

// StateFile is the file in the agent's state directory that holds the
// endpoint.
const StateFile = "report-endpoint.json"

// endpointRecord is the file's form.
type endpointRecord struct {
	Address    string `json:"address"`
	ServerName string `json:"serverName"`
	CA         string `json:"ca"`
	Session    string `json:"session"`
}

// Recall reads the file; a missing or unreadable one remembers nothing
// (the agent then watches the broadcast, as at its first start).
func (f EndpointFile) Recall() (protocol.ReportEndpoint, bool) {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return protocol.ReportEndpoint{}, false
	}
	var r endpointRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Address == "" {
		return protocol.ReportEndpoint{}, false
	}
	return protocol.ReportEndpoint{Address: r.Address, ServerName: r.ServerName, CA: r.CA, Session: r.Session}, true
}

// Remember writes the file whole (a new file renamed over the old one,
// so that a crash mid-write leaves the old one or the new one), or
// removes it for the zero endpoint.
func (f EndpointFile) Remember(ep protocol.ReportEndpoint) error {
	path := string(f)
	if ep.IsZero() {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.Marshal(endpointRecord{Address: ep.Address, ServerName: ep.ServerName, CA: ep.CA, Session: ep.Session})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-endpoint-*")
	if err != nil {
		return fmt.Errorf("remembering the report endpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("remembering the report endpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("remembering the report endpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("remembering the report endpoint: %w", err)
	}
	return nil
}

// EndpointInMemory is an EndpointMemory held in memory: for an agent run
// in the same process as what stands for its Pod's volume (the simulated
// nodes keep one per Pod, across the runs of its agent). The zero value
// remembers nothing.
type EndpointInMemory struct {
	mu sync.Mutex
	ep protocol.ReportEndpoint
}

// Recall returns the endpoint kept, if any.
func (m *EndpointInMemory) Recall() (protocol.ReportEndpoint, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ep, !m.ep.IsZero()
}

// Remember keeps ep; the zero endpoint forgets.
func (m *EndpointInMemory) Remember(ep protocol.ReportEndpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ep = ep
	return nil
}
