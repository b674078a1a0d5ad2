package childproc

import (
	"fmt"
	"net"
	"sync"
)

// given holds every port FreePorts has returned in this process. The kernel
// may hand a port that was just closed to the next listener on :0, so two
// calls (one per member of a cluster, say) could otherwise return the same
// port before either server has bound it.
var given struct {
	sync.Mutex
	ports map[int]bool
}

// FreePorts returns n loopback TCP ports that were free a moment ago, for a
// server to listen on. They are distinct from each other and from every port
// FreePorts returned before in this process. Another process may take one
// before the server does; a caller that can tell (the server exits at once)
// retries.
func FreePorts(n int) ([]int, error) {
	given.Lock()
	defer given.Unlock()
	if given.ports == nil {
		given.ports = make(map[int]bool)
	}
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("childproc: no loopback port this process has not handed out already, after %d tries", tries)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0") // held until all are chosen: distinct
		if err != nil {
			return nil, fmt.Errorf("childproc: finding a free port: %w", err)
		}
		defer l.Close()
		p := l.Addr().(*net.TCPAddr).Port
		if given.ports[p] {
			continue
		}
		given.ports[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}
