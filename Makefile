# inplace — fast in-place restarts for JobSet on Kubernetes.
#
# `make help` lists the targets. The two that matter on a fresh machine:
#   make demo   runs the main job on a local cluster
#   make test   runs every test

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT := $(abspath .)
BIN := $(ROOT)/bin
LOCAL := $(ROOT)/.local

# Pinned tool versions; tools are installed into ./bin.
CONTROLLER_TOOLS_VERSION ?= v0.21.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE_VERSION ?= v5.7.1
KUSTOMIZE := $(BIN)/kustomize-$(KUSTOMIZE_VERSION)
HELM_VERSION ?= v3.19.0
HELM := $(BIN)/helm-$(HELM_VERSION)
# krew: the install suite installs the release's kubectl plugin with it.
KREW_VERSION ?= v0.4.3
KREW := $(BIN)/krew-$(KREW_VERSION)
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
export KUSTOMIZE HELM KREW

GO_TEST_FLAGS ?= -race -count=1
# Per test binary, and a suite on real nodes first waits for the host's
# lock while the others run: on a cold machine every package but perf/
# took 43 minutes, most of it the six suites on real nodes one after the
# other (test/e2e/pytorch, realnode, upstream and install 6 to 9 each,
# kueue 5, trainer 3).
GO_TEST_TIMEOUT ?= 55m
# Control plane binaries for the local cluster and for envtest.
export KUBEBUILDER_ASSETS := $(BIN)
export INPLACE_BIN_DIR := $(BIN)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs into config/crd and the Roles of the two Deployments into config/rbac.
	$(CONTROLLER_GEN) crd:maxDescLen=512,generateEmbeddedObjectMeta=true paths="./api/..." output:crd:artifacts:config=config/crd/bases
	@# One Role per Deployment, from the RBAC markers of the code it runs:
	@# the JobSet controller (inplace-manager), the admission server
	@# (inplace-webhook), and the admission server's writes of its own CA,
	@# which only an install without cert-manager grants.
	$(CONTROLLER_GEN) rbac:roleName=inplace-manager,fileName=role.yaml paths="./controller/..." paths="./cmd/manager/app" output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=inplace-webhook,fileName=webhook_role.yaml paths="./webhook" paths="./policies/..." paths="./cmd/manager/app" output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=inplace-webhook-cabundle,fileName=cabundle_role.yaml paths="./webhook/selfsigned" output:rbac:artifacts:config=config/selfsigned
	@# The Helm chart renders the same objects from copies of config/.
	cp config/crd/bases/*.yaml charts/inplace/crds/
	cp config/rbac/role.yaml config/rbac/webhook_role.yaml config/rbac/role_binding.yaml config/rbac/metrics_reader_role.yaml \
	   config/rbac/service_account.yaml config/selfsigned/cabundle_role.yaml config/selfsigned/cabundle_role_binding.yaml \
	   config/certmanager/certificate.yaml config/agent/validating-admission-policy.yaml config/agent/cluster-role.yaml \
	   config/prometheus/monitor.yaml config/prometheus/policy-alerts.yaml config/prometheus/restart-alerts.yaml config/manager/flowcontrol.yaml charts/inplace/files/
	cp config/webhook/manifests.yaml charts/inplace/files/webhook.yaml
	cp config/webhook/service.yaml charts/inplace/files/webhook_service.yaml
	cp config/webhook/exemption-guard.yaml charts/inplace/files/

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

# Every binary says which build it is (version subcommand or flag, the
# manager's /version and inplace_build_info). The tree's version is set in
# the file VERSION alone; `go test ./hack/release` checks every file that
# names it (config/, the chart, the test images, the docs, the CHANGELOG).
VERSION ?= $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION_PKG := github.com/inplace-dev/inplace/cmd/internal/version
GO_LDFLAGS := -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).commit=$(COMMIT)

.PHONY: build
# kubectl-inplace is inplacectl as a kubectl plugin (kubectl inplace ...);
# kubectl (1.26+) completes `kubectl inplace <TAB>` by running
# kubectl_complete-inplace, which is the same binary under that name.
build: ## Build inplace-manager, inplace-agent, inplace-supervisor, inplacectl and the kubectl plugin kubectl-inplace into ./bin, stamped with VERSION.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(BIN)/inplace-manager ./cmd/manager
	CGO_ENABLED=0 go build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(BIN)/inplace-agent ./cmd/agent
	CGO_ENABLED=0 go build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(BIN)/inplace-supervisor ./cmd/supervisor
	CGO_ENABLED=0 go build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(BIN)/inplacectl ./cmd/inplacectl
	CGO_ENABLED=0 go build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(BIN)/kubectl-inplace ./cmd/kubectl-inplace
	ln -sf kubectl-inplace $(BIN)/kubectl_complete-inplace

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (configuration in .golangci.yml).
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: generate manifests lint verify-tree ## Fail if generated files are stale, code is unformatted, vet or lint complain, or the tree holds binaries.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- api config charts)" || { echo "untracked generated files:"; git ls-files --others --exclude-standard -- api config charts; exit 1; }

.PHONY: verify-tree
verify-tree: ## Fail if a tracked file is over 1 MB or is an executable binary.
	./hack/verify-tree.sh

##@ Release

RELEASE_DIR ?= dist
RELEASE_PLATFORMS ?= linux/amd64,linux/arm64
RELEASE_CLI_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64

.PHONY: release
release: $(KUSTOMIZE) $(HELM) ## Write a release into dist/ (VERSION=vX.Y.Z): install manifests, the chart archive, the images as OCI archives, the kubectl plugin, SHA256SUMS.
	@# VERSION has a default for builds; a release names its own.
	@$(if $(filter command line environment,$(origin VERSION)),:,echo "make release needs the version: make release VERSION=vX.Y.Z" >&2; exit 2)
	go run ./hack/release --version $(VERSION) --commit $(COMMIT) --out $(RELEASE_DIR) --platforms $(RELEASE_PLATFORMS) --cli-platforms $(RELEASE_CLI_PLATFORMS)

.PHONY: push
push: ## Push the release's images in dist/ to REGISTRY (host[:port][/path]; INSECURE=true for plain HTTP), keeping their digests; MANIFESTS=dir writes install manifests that pull from it.
	@$(if $(REGISTRY),:,echo "make push needs the registry: make push REGISTRY=host[:port][/path]" >&2; exit 2)
	go run ./hack/push --dist $(RELEASE_DIR) --registry $(REGISTRY) $(if $(filter true,$(INSECURE)),--insecure) $(if $(MANIFESTS),--manifests $(MANIFESTS))

##@ Images

IMG_MANAGER ?= ghcr.io/inplace-dev/inplace-manager:$(VERSION)
IMG_AGENT ?= ghcr.io/inplace-dev/inplace-agent:$(VERSION)
CONTAINER_TOOL ?= docker

.PHONY: docker-build docker-build-manager docker-build-agent
docker-build: docker-build-manager docker-build-agent ## Build both images (needs a container engine).
docker-build-manager: ## Build the inplace-manager image as $(IMG_MANAGER).
	$(CONTAINER_TOOL) build --target inplace-manager --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMG_MANAGER) .
docker-build-agent: ## Build the inplace-agent image as $(IMG_AGENT).
	$(CONTAINER_TOOL) build --target inplace-agent --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMG_AGENT) .

##@ Test

# Tests by kind: unit tests need nothing (every suite that needs a cluster
# skips itself under -short); integration suites run a real kube-apiserver
# and etcd; end-to-end suites run the whole system on a local cluster.
# `make test` runs all of them in one go test invocation, so that the
# packages share the two cores as go test schedules them.
INTEGRATION_PKGS = ./test/integration/... ./test/cluster/...
E2E_PKGS = ./test/e2e ./test/e2e/faults ./test/e2e/tutorial ./perf/restartbench/...
REALNODE_PKGS = ./test/e2e/realnode/... ./test/e2e/install/... ./test/e2e/pytorch/... ./test/e2e/upstream/... ./test/e2e/kueue/... ./test/e2e/trainer/...
UPSTREAM_PKGS = ./test/e2e/upstream/...
KUEUE_PKGS = ./test/e2e/kueue/...
TRAINER_PKGS = ./test/e2e/trainer/...

.PHONY: test
# The benchmark lab's smoke test compares in place with Recreate in wall
# time: it runs after the others, alone on the two cores, so that another
# package's cluster does not decide the comparison.
test: cluster-binaries node-deps $(KUSTOMIZE) $(HELM) $(KREW) ## Run every test: unit, integration and end to end (real nodes included), with -race.
	go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) $$(go list ./... | grep -v '/perf/')
	go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) ./perf/...

.PHONY: test-unit
test-unit: ## Run the unit tests (no cluster).
	go test $(GO_TEST_FLAGS) -short ./...

.PHONY: test-integration
test-integration: cluster-binaries node-deps $(KUSTOMIZE) $(HELM) ## Run the suites against a real kube-apiserver and etcd.
	go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) $(INTEGRATION_PKGS)

.PHONY: test-e2e
test-e2e: cluster-binaries ## Run the end-to-end suites on a local cluster (simulated nodes).
	go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) $(E2E_PKGS)

.PHONY: test-realnode
test-realnode: cluster-binaries node-deps $(KUSTOMIZE) $(HELM) $(KREW) ## Run the end-to-end suites on real kubelets and containerd, the install suite included (needs root).
	go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) $(REALNODE_PKGS)

.PHONY: test-kueue
test-kueue: cluster-binaries node-deps $(KUSTOMIZE) ## Run Kueue's own JobSet e2e specs and the shared-cluster specs (preemption, MultiKueue managedBy, topology, waitForPodsReady) with Kueue built from its module (by cluster-binaries), deployed from its manifests in front of config/jobset-names, on 3 real nodes; print the summaries (needs root).
	go test $(GO_TEST_FLAGS) -v -timeout $(GO_TEST_TIMEOUT) $(KUEUE_PKGS)

.PHONY: test-trainer
test-trainer: cluster-binaries node-deps $(KUSTOMIZE) ## Run a TrainJob of examples/pytorch/trainer with Kubeflow Trainer built from its module (by cluster-binaries), deployed from its manifests on config/jobset-names, made to restart in place by policies/library/trainer-restart-in-place, on 2 real nodes; print the summary (needs root).
	go test $(GO_TEST_FLAGS) -v -timeout $(GO_TEST_TIMEOUT) $(TRAINER_PKGS)

.PHONY: test-upstream
test-upstream: cluster-binaries node-deps $(KUSTOMIZE) ## Run upstream JobSet's own e2e suite (built from its module by cluster-binaries) against the drop-in install config/jobset-names on 3 real nodes, and print its summary (needs root).
	go test $(GO_TEST_FLAGS) -v -timeout $(GO_TEST_TIMEOUT) $(UPSTREAM_PKGS)

##@ Benchmarks

.PHONY: bench
bench: bench-admission bench-restart bench-pytorch bench-sizing ## Run every benchmark; results in .local/bench/.

.PHONY: bench-admission
bench-admission: cluster-binaries ## Admission: handler latency, policy cost, creates through the apiserver.
	go run ./perf/bench/admission -out $(LOCAL)/bench/admission.json

.PHONY: bench-restart
# REAL_NODES=K runs the Pods on K real nodes (root), BENCH_NODES Pods in all.
# On real nodes upstream JobSet's controller and agent are measured too.
ifneq ($(filter-out 0,$(REAL_NODES)),)
BENCH_NODES ?= 16,64,128
BENCH_OUT ?= $(LOCAL)/bench/restart-real.json
BENCH_STRATEGIES ?= InPlaceRestart,InPlaceRestart/process,Recreate,BlockingRecreate,upstream/InPlaceRestart,upstream/Recreate
endif
BENCH_NODES ?= 100,1000,5000
BENCH_STRATEGIES ?= InPlaceRestart,InPlaceRestart/process,Recreate,BlockingRecreate
BENCH_REPEATS ?= 5
BENCH_CONTROL_PLANE ?= scale
BENCH_OUT ?= $(LOCAL)/bench/restart.json
bench-restart: cluster-binaries $(if $(filter-out 0,$(REAL_NODES)),node-deps $(KUSTOMIZE)) ## Restarts at scale: in place (container and process scope) vs Recreate vs BlockingRecreate, the floor, API cost, charts (BENCH_NODES, BENCH_REPEATS, BENCH_CONTROL_PLANE, BENCH_STRATEGIES; REAL_NODES=K on real kubelets, upstream JobSet's controller beside ours).
	go run ./perf/bench/restart -nodes $(BENCH_NODES) -repeats $(BENCH_REPEATS) -control-plane $(BENCH_CONTROL_PLANE) -real-nodes $(or $(REAL_NODES),0) -strategies $(BENCH_STRATEGIES) -out $(BENCH_OUT)

.PHONY: bench-sizing
bench-sizing: cluster-binaries ## Sizing: the controller's and the admission server's peak memory and CPU by JobSets, Pods and policies (BENCH_SIZING_ROWS).
	go run ./perf/bench/sizing $(if $(BENCH_SIZING_ROWS),-rows $(BENCH_SIZING_ROWS)) -out $(LOCAL)/bench/sizing.json

# The first starts bench-pytorch measures: the test worker's JobSets of
# that many Pods on 4 real nodes, per strategy, one run per way of
# delivering the supervisor (agent.supervisorVolume).
FIRST_START_NODES ?= 16,64
FIRST_START_STRATEGIES ?= Recreate,Recreate/sidecar,InPlaceRestart,InPlaceRestart/process,InPlaceRestart/in-process
FIRST_START_SUPERVISOR_VOLUMES ?= Image EmptyDir
FIRST_START_ROUNDS ?= 3

.PHONY: bench-pytorch
bench-pytorch: cluster-binaries node-deps $(KUSTOMIZE) ## Training lost per failure for examples/pytorch on 2 real nodes, every strategy (BENCH_REPEATS runs each); then the first start of the test worker's JobSets on 4 real nodes (FIRST_START_NODES, FIRST_START_STRATEGIES, FIRST_START_SUPERVISOR_VOLUMES, FIRST_START_ROUNDS; empty FIRST_START_NODES skips it).
	DEMO_ARGS="-repeats $(BENCH_REPEATS) -json $(LOCAL)/bench/pytorch.json" ./hack/demo-pytorch.sh
	$(if $(FIRST_START_NODES),for v in $(FIRST_START_SUPERVISOR_VOLUMES); do \
		go run ./perf/bench/restart -real-nodes 4 -nodes $(FIRST_START_NODES) -repeats 0 -failures exit -floors "" \
			-first-start-rounds $(FIRST_START_ROUNDS) -strategies $(FIRST_START_STRATEGIES) -supervisor-volume $$v -out $(LOCAL)/bench/first-start-$$v.json || exit 1; \
	done)

##@ Local cluster

.PHONY: cluster-binaries
cluster-binaries: ## Build etcd, the Kubernetes control plane and the kubelet from Go modules into ./bin (cached).
	./hack/build-cluster-binaries.sh

.PHONY: node-deps
node-deps: ## Install what real nodes need from Debian's packages (runc, CNI plugins, iptables, debootstrap; containerd is built by cluster-binaries); idempotent.
	./hack/install-node-deps.sh

.PHONY: cluster-up
REAL_NODES ?= 0
cluster-up: cluster-binaries ## Start the local cluster in the background: control plane, inplace-manager, NODES simulated nodes (default 16, 0 with REAL_NODES) and REAL_NODES real ones (default 0; root); writes .local/kubeconfig.
	NODES=$(NODES) REAL_NODES=$(REAL_NODES) ./hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and every process it started.
	./hack/cluster.sh down

.PHONY: image-pytorch
image-pytorch: node-deps ## Build the PyTorch example's image from Debian's packages (needs root; cached in bin/images) and import it into the running local cluster's real nodes.
	go run ./test/cmd/image-pytorch

.PHONY: demo-pytorch
demo-pytorch: cluster-binaries node-deps ## Train examples/pytorch (DDP) on 2 real nodes, crash a rank, and show the restart in place (every scope; SCOPE=container, process or in-process: one) and with Recreate.
	SCOPE=$(SCOPE) ./hack/demo-pytorch.sh

.PHONY: demo
demo: cluster-binaries ## Run the demo on a local cluster: 4 real nodes where this machine can run them, else 16 simulated ones (REAL_NODES, NODES choose).
	./hack/demo.sh

##@ Tools

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(BIN)/controller-gen $@

$(KUSTOMIZE):
	GOBIN=$(BIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(BIN)/kustomize $@

$(HELM):
	GOBIN=$(BIN) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/helm $@

$(KREW):
	GOBIN=$(BIN) go install sigs.k8s.io/krew/cmd/krew@$(KREW_VERSION)
	mv $(BIN)/krew $@

$(GOLANGCI_LINT):
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/golangci-lint $@

.PHONY: kustomize helm krew golangci-lint
kustomize: $(KUSTOMIZE) ## Install kustomize into ./bin.
helm: $(HELM) ## Install helm into ./bin.
krew: $(KREW) ## Install krew into ./bin.
golangci-lint: $(GOLANGCI_LINT) ## Install golangci-lint into ./bin.
