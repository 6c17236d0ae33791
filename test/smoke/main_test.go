package smoke

import (
	"context"
	"testing"
	"time"

	"github.com/inplace-dev/inplace/test/cluster"
)

func TestSmoke(t *testing.T) {
	start := time.Now()
	c, err := cluster.Start(context.Background(), cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started in %s: %s", time.Since(start), c.Kubeconfig)
	if err := c.Stop(false); err != nil {
		t.Fatal(err)
	}
}
