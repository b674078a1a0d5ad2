package childproc

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago, for a server to listen on. Another process may take one before the
// server does; a caller that can tell (the server exits at once) retries.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0") // held until all are chosen: distinct
		if err != nil {
			return nil, fmt.Errorf("childproc: finding a free port: %w", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
