// The lab's pod sandbox process: holds the pod's namespaces until told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	reap := make(chan os.Signal, 16)
	signal.Notify(reap, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-reap:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
