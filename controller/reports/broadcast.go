package reports

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/reports/token"
)

// The broadcast stream (protocol.BroadcastPath): an agent whose container
// restarted with its Pod in place reads its JobSet's broadcast from the
// leader, as the leader's cache holds it, instead of opening a watch of
// the ConfigMap. A container-scope restart of N Pods would otherwise begin
// with N watches on the API server, one per restarted agent.
//
// The stream says nothing a watch would not: the broadcast ConfigMap's
// data, which the agents' Role lets them read anyway, for the JobSet the
// token's Pod belongs to, and no other.

// maxStreamsPerPod bounds the streams one Pod's token holds open: an agent
// holds one, and a second only while a restarted agent's first is not yet
// closed.
const maxStreamsPerPod = 2

// streams holds the open broadcast streams, by broadcast ConfigMap, and
// counts them per Pod.
type streams struct {
	mu     sync.Mutex
	byName map[types.NamespacedName]map[*stream]struct{}
	byPod  map[types.UID]int
	// lines holds each broadcast's data encoded once, at the resource
	// version the streams last read: a change woken in N streams is
	// encoded once, not N times.
	lines  map[types.NamespacedName]encoded
	closed bool
	done   chan struct{}
}

// encoded is a broadcast's data as a line of the stream.
type encoded struct {
	resourceVersion string
	line            []byte
}

// stream is one agent's: woken when its broadcast changes.
type stream struct{ wake chan struct{} }

func newStreams() *streams {
	return &streams{byName: map[types.NamespacedName]map[*stream]struct{}{}, byPod: map[types.UID]int{}, lines: map[types.NamespacedName]encoded{}, done: make(chan struct{})}
}

// open registers a stream of the broadcast name for pod; false when the
// Pod holds maxStreamsPerPod already or the server is stopping.
func (s *streams) open(name types.NamespacedName, pod types.UID) (*stream, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.byPod[pod] >= maxStreamsPerPod {
		return nil, false
	}
	st := &stream{wake: make(chan struct{}, 1)}
	if s.byName[name] == nil {
		s.byName[name] = map[*stream]struct{}{}
	}
	s.byName[name][st] = struct{}{}
	s.byPod[pod]++
	return st, true
}

// close unregisters a stream that ended.
func (s *streams) close(name types.NamespacedName, pod types.UID, st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byName[name], st)
	if len(s.byName[name]) == 0 {
		delete(s.byName, name)
		delete(s.lines, name)
	}
	if s.byPod[pod]--; s.byPod[pod] <= 0 {
		delete(s.byPod, pod)
	}
}

// line is cm's data as a line of the stream, encoded once per resource
// version of the broadcast name.
func (s *streams) line(name types.NamespacedName, cm *corev1.ConfigMap) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.lines[name]; ok && e.resourceVersion == cm.ResourceVersion {
		return e.line, nil
	}
	line, err := json.Marshal(cm.Data)
	if err != nil {
		return nil, err
	}
	line = append(line, '\n')
	if _, open := s.byName[name]; open {
		s.lines[name] = encoded{cm.ResourceVersion, line}
	}
	return line, nil
}

// changed wakes the streams of the broadcast name.
func (s *streams) changed(name types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.byName[name] {
		select {
		case st.wake <- struct{}{}:
		default: // already woken: it reads the cache as it stands then
		}
	}
}

// stop ends every stream: the term is over, and the agents watch the
// ConfigMap until the next leader's broadcast names it.
func (s *streams) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}

// BroadcastChanged tells the endpoint that the broadcast ConfigMap name
// changed in the manager's cache (an informer's event handler): the
// agents that follow it are sent the new data.
func (s *Server) BroadcastChanged(name types.NamespacedName) { s.streams.changed(name) }

// BroadcastHandler is the event handler of the manager's informer of
// broadcast ConfigMaps that calls BroadcastChanged.
func (s *Server) BroadcastHandler() toolscache.ResourceEventHandler {
	changed := func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if cm, ok := o.(*corev1.ConfigMap); ok {
			s.BroadcastChanged(types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name})
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, o any) { changed(o) },
		DeleteFunc: changed,
	}
}

// serveBroadcast streams the broadcast of the JobSet pod belongs to:
// the ConfigMap's data as the cache holds it, then again at each change,
// until the agent goes, the ConfigMap is no longer its JobSet's, or the
// term ends.
func (s *Server) serveBroadcast(w http.ResponseWriter, r *http.Request, pod *corev1.Pod, claims token.Claims) {
	js, err := s.podJobSet(r.Context(), pod, pod.Labels[jobset.JobSetNameKey])
	if err != nil {
		s.answer(w, err, nil)
		return
	}
	name := types.NamespacedName{Namespace: js.Namespace, Name: protocol.BroadcastName(js.Name)}
	st, ok := s.streams.open(name, pod.UID)
	if !ok {
		s.answer(w, refuse(http.StatusTooManyRequests, "too_many_streams", "pod %s/%s holds %d broadcast streams already, or the leader is stopping: watch the ConfigMap", pod.Namespace, pod.Name, maxStreamsPerPod), nil)
		return
	}
	defer s.streams.close(name, pod.UID, st)
	s.streamsOpen.Inc()
	defer s.streamsOpen.Dec()

	rc := http.NewResponseController(w)
	// A stream lasts as long as the agent's run: the server's request
	// deadlines bound each write instead.
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	// One JSON object per line.
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Cache-Control", "no-store")
	var sent string // the resource version last sent
	for first := true; ; first = false {
		if !first {
			if _, err := s.boundPod(r.Context(), claims); err != nil {
				return // the token's Pod is gone: its stream goes with it
			}
		}
		var cm corev1.ConfigMap
		err := s.opts.Reader.Get(r.Context(), name, &cm, client.UnsafeDisableDeepCopy)
		switch {
		case apierrors.IsNotFound(err) && first:
			s.answer(w, refuse(http.StatusNotFound, "no_broadcast", "the broadcast ConfigMap %s is not in the leader's cache yet: watch it", name), nil)
			return
		case err != nil && first:
			s.answer(w, refuse(http.StatusServiceUnavailable, "unavailable", "reading the broadcast ConfigMap %s: %v", name, err), nil)
			return
		case err != nil:
			return // the agent watches the ConfigMap instead
		case !metav1.IsControlledBy(&cm, js):
			if first {
				s.answer(w, refuse(http.StatusForbidden, "other_jobset", "ConfigMap %s is not the broadcast of the JobSet pod %s/%s belongs to", name, pod.Namespace, pod.Name), nil)
			}
			return
		}
		if first {
			s.results.WithLabelValues("stream").Inc()
		}
		if first || cm.ResourceVersion != sent {
			line, err := s.streams.line(name, &cm)
			if err != nil {
				return
			}
			sent = cm.ResourceVersion
			_ = rc.SetWriteDeadline(time.Now().Add(s.keepAlive.request))
			if _, err := w.Write(line); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			_ = rc.SetWriteDeadline(time.Time{})
		}
		select {
		case <-st.wake:
		case <-r.Context().Done():
			return
		case <-s.streams.done:
			return
		}
	}
}
