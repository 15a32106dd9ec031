package telemetry

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/webserve"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// The metrics endpoint, as a worker process serves it, survives hostile
// clients: unknown paths and methods get 404/405, headers over the limit
// 431, and hundreds of clients that never finish their headers (slowloris)
// cost a bounded amount of memory, are cut off, and leave the endpoint
// answering scrapes with the memory it had before.
func TestHostileHTTP(t *testing.T) {
	r := NewRegistry()
	w := r.Worker(actor0)
	w.Actor().EnvSteps.Add(5)
	srv, err := webserve.Listen("127.0.0.1:0", r.Handler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := "http://" + srv.Addr()
	get := func(path string, header http.Header) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name   string
		path   string
		header http.Header
		want   int
	}{
		{"scrape", "/metrics", nil, http.StatusOK},
		{"unknown path", "/admin", nil, http.StatusNotFound},
		{"root", "/", nil, http.StatusNotFound},
		{"traversal", "/metrics/../../etc/passwd", nil, http.StatusNotFound},
		{"huge header", "/metrics", http.Header{"X-Big": {strings.Repeat("a", 1<<20)}}, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := get(tc.path, tc.header); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
	resp, err := http.Post(base+"/metrics", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}

	before := heapInUse()
	goroutines := runtime.NumGoroutine()
	const slow = 300
	conns := make([]net.Conn, 0, slow)
	for range slow {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		// Half a request line and a header that never ends.
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: %s", strings.Repeat("b", 1000))
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	during := heapInUse()
	// The server cuts the slow clients off at its header timeout: each of
	// the first MaxConns reads EOF, and the rest are served in turn.
	cut := 0
	for _, c := range conns[:webserve.MaxConns] {
		_ = c.SetReadDeadline(time.Now().Add(3 * webserve.ReadHeaderTimeout))
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			cut++
		}
	}
	if cut != webserve.MaxConns {
		t.Errorf("%d of %d slow clients cut off", cut, webserve.MaxConns)
	}
	for _, c := range conns {
		c.Close()
	}
	eventually.NoError(t, 3*webserve.ReadHeaderTimeout, "scrapes answered again", func() error {
		if code := get("/metrics", nil); code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
	eventually.NoError(t, 3*webserve.ReadHeaderTimeout, "connections released", func() error {
		if n := runtime.NumGoroutine(); n > goroutines+10 {
			return fmt.Errorf("%d goroutines, %d before", n, goroutines)
		}
		return nil
	})
	after := heapInUse()
	t.Logf("heap in use: %d KiB before, %d KiB with %d slow clients, %d KiB after", before>>10, during>>10, slow, after>>10)
	// At most MaxConns connections are read at once, each with at most
	// MaxHeaderBytes buffered: the limit, with room for the runtime.
	if limit := before + webserve.MaxConns*webserve.MaxHeaderBytes*4 + 8<<20; during > limit || after > limit {
		t.Errorf("heap grew past %d KiB", limit>>10)
	}
}
