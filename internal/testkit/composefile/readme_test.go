package composefile_test

import (
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commands is what a set of shell commands (the README's compose section,
// or the comment at the top of docker-compose.yml) tells the user to run.
type commands struct {
	lines     []string          // one command per line, continuations joined
	env       map[string]string // FENCELOCK_* variables exported
	endpoints []string          // fencelock's --endpoints, the same everywhere
}

var (
	exportRe    = regexp.MustCompile(`\b(FENCELOCK_[A-Z0-9_]+)=('[^']*'|"[^"]*"|[^\s'"]+)`)
	endpointsRe = regexp.MustCompile(`--endpoints[= ](\S+)`)
)

// composePage returns the page of the docs that says how to run the
// suite against docker compose, without its title.
func composePage(t *testing.T) string {
	t.Helper()
	text := readFile(t, composeDocPath)
	_, after, ok := strings.Cut(text, "# Real services: docker compose\n")
	if !ok {
		t.Fatalf("%s: no title %q", composeDocPath, "# Real services: docker compose")
	}
	return after
}

// headerComment returns the comment lines that open the compose file, with
// the comment markers removed.
func headerComment(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for line := range strings.Lines(readFile(t, composePath)) {
		if !strings.HasPrefix(line, "#") {
			break
		}
		line = strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ")
		b.WriteString(line)
	}
	return b.String()
}

// parseCommands reads the commands in text's code lines: in Markdown, the
// fenced blocks; in the compose file's comment, the indented lines.
func parseCommands(t *testing.T, where, text string, markdown bool) commands {
	t.Helper()
	c := commands{env: map[string]string{}}
	for _, line := range codeLines(text, markdown) {
		c.lines = append(c.lines, line)
		if strings.HasPrefix(line, "export ") {
			for _, m := range exportRe.FindAllStringSubmatch(line, -1) {
				c.env[m[1]] = strings.Trim(m[2], `'"`)
			}
		}
		for _, m := range endpointsRe.FindAllStringSubmatch(line, -1) {
			eps := strings.Split(m[1], ",")
			if c.endpoints != nil && !slices.Equal(eps, c.endpoints) {
				t.Errorf("%s: --endpoints %s, then %s; want the same cluster everywhere", where, strings.Join(c.endpoints, ","), m[1])
			}
			c.endpoints = eps
		}
	}
	return c
}

// codeLines returns the lines of code in text, each continued line (ending
// in a backslash) joined to the next.
func codeLines(text string, markdown bool) []string {
	var lines []string
	inFence, pending := false, ""
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if markdown && strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if markdown && !inFence || !markdown && !strings.HasPrefix(line, "  ") {
			continue
		}
		line = pending + strings.TrimSpace(line)
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending = cont
			continue
		}
		lines, pending = append(lines, line), ""
	}
	return lines
}

// has reports whether some command starts with prefix.
func (c commands) has(prefix string) bool {
	return slices.ContainsFunc(c.lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

// endpointPorts returns the ports of the --endpoints, which must all be on
// this machine.
func (c commands) endpointPorts(t *testing.T) []string {
	t.Helper()
	var ports []string
	for _, ep := range c.endpoints {
		host, port, err := net.SplitHostPort(strings.TrimPrefix(ep, "http://"))
		if err != nil || host != "localhost" && host != "127.0.0.1" {
			t.Errorf("README: --endpoints %s: want localhost:PORT (err %v)", ep, err)
		}
		ports = append(ports, port)
	}
	return ports
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
