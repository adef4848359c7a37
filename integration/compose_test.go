package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The docker-compose file is valid as docker-compose reads it (CI has no
// Docker engine, so it is validated, not run), and every broker config it
// mounts is accepted by `kwal broker`'s loader.
func TestDockerComposeValid(t *testing.T) {
	dc := os.Getenv("KWAL_DOCKER_COMPOSE")
	if dc == "" {
		if p, err := exec.LookPath("docker-compose"); err == nil {
			dc = p
		}
	}
	if dc == "" {
		t.Skip("SKIPPED: docker-compose not installed; scripts/test-env.sh installs it")
	}
	cmd := exec.Command(dc, "-f", filepath.Join("..", "docker-compose.yml"), "config", "-q")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker-compose config -q: %v\n%s", err, out)
	}
}
