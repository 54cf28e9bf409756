// Command pause is the sandbox process of every pod on the real-node test cluster: it holds the
// pod's namespaces, reaps the orphans a PID-sharing pod hands it, and exits on SIGTERM or SIGINT.
// Written for kvtier (no registry here to pull the upstream pause image from).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			// Reap every child that has exited; -1: any child, WNOHANG: stop when none is left.
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
