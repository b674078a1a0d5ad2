package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// readRedis reads the run's Redis keys' history from the server's
// append-only file (in dir/appendonlydir): Redis's own record of every
// write it applied, in order, a script's as the commands it ran (effects
// replication). With appendfsync always a write is in the file before its
// reply is sent, and with automatic rewrites off no history is compacted
// away. Every HSET of a key's token and value is a write of the key.
func readRedis(h *check.Storage, dir string, keys []string) error {
	files, err := aofFiles(filepath.Join(dir, "appendonlydir"))
	if err != nil {
		return err
	}
	want := map[string]string{} // Redis key: resource
	for _, k := range keys {
		want[redisPrefix+k] = check.ResourceName(check.ResRedis, k)
	}
	for _, f := range files {
		if err := readAOF(f, func(cmd []string) {
			if len(cmd) < 2 || !strings.EqualFold(cmd[0], "hset") {
				return
			}
			res, ok := want[cmd[1]]
			if !ok {
				return
			}
			fields := map[string]string{}
			for i := 2; i+1 < len(cmd); i += 2 {
				fields[cmd[i]] = cmd[i+1]
			}
			tok, okTok := fields["token"]
			val, okVal := fields["value"]
			if !okTok || !okVal || tok == "" { // a claim (the floor alone), or a tombstone
				return
			}
			n, err := strconv.ParseInt(tok, 10, 64)
			if err != nil {
				return
			}
			h.Writes[res] = append(h.Writes[res], check.Record{Token: n, Value: val})
			h.Final[res] = val
		}); err != nil {
			return err
		}
	}
	return nil
}

// aofFiles returns the incremental files of a Redis 7 multi-part AOF, in
// the order its manifest lists them (the base file holds the empty
// dataset the server started with).
func aofFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("harness: reading Redis's AOF: %w", err)
	}
	var manifest string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".manifest") {
			manifest = filepath.Join(dir, e.Name())
		}
	}
	if manifest == "" {
		return nil, fmt.Errorf("harness: no AOF manifest in %s", dir)
	}
	b, err := os.ReadFile(manifest)
	if err != nil {
		return nil, err
	}
	var files []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		// file NAME seq N type T
		if len(f) >= 6 && f[0] == "file" && f[4] == "type" && f[5] == "i" {
			files = append(files, filepath.Join(dir, f[1]))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("harness: no incremental AOF in %s", manifest)
	}
	return files, nil
}

// readAOF calls fn with each command of an AOF file (RESP arrays of bulk
// strings).
func readAOF(path string, fn func(cmd []string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		cmd, err := readCommand(r)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			// The end, or a command Redis is writing as we read (a check
			// while the workers still write): every acknowledged write is
			// whole before it (appendfsync always writes before replying).
			return nil
		}
		if err != nil {
			return fmt.Errorf("harness: %s: %w", path, err)
		}
		fn(cmd)
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := readHeader(r, '*')
	if err != nil {
		return nil, err
	}
	cmd := make([]string, n)
	for i := range cmd {
		l, err := readHeader(r, '$')
		if err != nil {
			return nil, noEOF(err)
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, noEOF(err)
		}
		cmd[i] = string(b[:l])
	}
	return cmd, nil
}

// readHeader reads a line "<kind><n>\r\n" and returns n.
func readHeader(r *bufio.Reader, kind byte) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		if err == io.EOF && line == "" {
			return 0, io.EOF
		}
		return 0, noEOF(err)
	}
	line = strings.TrimRight(line, "\r\n")
	if len(line) < 2 || line[0] != kind {
		return 0, fmt.Errorf("AOF: got %q, want a %q header", line, kind)
	}
	return strconv.Atoi(line[1:])
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
