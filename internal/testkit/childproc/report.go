package childproc

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"sync"
)

// Go is the command that lets a worker holding before a write go on.
const Go = "go"

// reportMu keeps the reports of one process whole when goroutines report
// at once.
var reportMu sync.Mutex

// Report writes one report line to w, the child's stdout: word, a space
// and payload, whose newlines become spaces. Safe for concurrent use.
func Report(w io.Writer, word, payload string) error {
	line := word + " " + strings.ReplaceAll(payload, "\n", " ") + "\n"
	reportMu.Lock()
	defer reportMu.Unlock()
	_, err := io.WriteString(w, line)
	return err
}

// ParseReport splits a report line into its word and payload.
func ParseReport(line []byte) (word, payload string) {
	word, payload, _ = strings.Cut(string(line), " ")
	return word, payload
}

// ReadCommands calls handle with each command read from r, the child's
// stdin, split into its word and argument, until EOF or a read error.
func ReadCommands(r io.Reader, handle func(word, arg string)) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		word, arg, _ := strings.Cut(sc.Text(), " ")
		handle(word, arg)
	}
}

// AwaitGo reads commands from r, the child's stdin, until [Go]. It fails
// if r ends first. It reads through its own buffer: call it once per r.
func AwaitGo(r io.Reader) error {
	found := false
	sc := bufio.NewScanner(r)
	for !found && sc.Scan() {
		found = sc.Text() == Go
	}
	if !found {
		return errors.Join(errors.New("childproc: stdin ended before the go-ahead"), sc.Err())
	}
	return nil
}
