// Package pytorch runs examples/pytorch, a real PyTorch DDP program under
// torchrun, on real kubelets with containerd and the cluster's DNS: a rank
// crashes after a checkpoint, every rank restarts in place and resumes from
// it; a fatal exit code fails the JobSet without a restart; Recreate resumes
// from a shared volume, for comparison. The image is built from Debian's
// packages without a container engine (package test/images).
package pytorch
