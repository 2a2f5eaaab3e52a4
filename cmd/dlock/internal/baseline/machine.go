package baseline

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Machine describes where figures are measured: the CPU, the platform,
// Go, and the version of each server installed.
func Machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimLeft(v, " \t:"))
				break
			}
		}
	}
	var vs []string
	for _, c := range [][]string{{"redis-server", "--version"}, {"postgres", "--version"}, {"etcd", "--version"}, {"mariadbd", "--version"}} {
		out, err := exec.Command(c[0], c[1:]...).Output()
		if err == nil {
			vs = append(vs, strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]))
		}
	}
	return fmt.Sprintf("%d × %s (shared), %s/%s, %s; %s", runtime.NumCPU(), cpu, runtime.GOOS, runtime.GOARCH, runtime.Version(), strings.Join(vs, "; "))
}
