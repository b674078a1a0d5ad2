package check

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// TextWidth is the widest line the text summary prints ([PrintSummary],
// [PrintViolations], [PrintMetrics]): a terminal of 100 columns shows it
// without wrapping.
const TextWidth = 100

// table is a text table: its first left columns aligned left (names),
// the others right (numbers), two spaces apart, each line indented.
type table struct {
	indent string
	left   int
	rows   [][]string // the first is the header
}

func (t *table) add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, row)
}

// write writes the table to w.
func (t *table) write(w io.Writer) {
	for _, l := range t.lines() {
		fmt.Fprintln(w, l)
	}
}

// lines returns the table's lines, the header first.
func (t *table) lines() []string {
	var widths []int
	for _, row := range t.rows {
		for i, c := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var lines []string
	for _, row := range t.rows {
		var b strings.Builder
		b.WriteString(t.indent)
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < t.left {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		lines = append(lines, strings.TrimRight(b.String(), " "))
	}
	return lines
}

// wrap writes text to w in lines of at most TextWidth characters, broken
// between words: the first line after first, the others after indent, or
// under the first line's text when indent is "". A word longer than a
// line gets a line of its own.
func wrap(w io.Writer, first, indent, text string) {
	if indent == "" {
		indent = strings.Repeat(" ", utf8.RuneCountInString(first))
	}
	line := first
	n := utf8.RuneCountInString(line)
	fresh := true // nothing on the line but its prefix
	for _, word := range strings.Fields(text) {
		wn := utf8.RuneCountInString(word)
		if !fresh && n+1+wn > TextWidth {
			fmt.Fprintln(w, line)
			line, n, fresh = indent, utf8.RuneCountInString(indent), true
		}
		if !fresh {
			line, n = line+" ", n+1
		}
		line, n, fresh = line+word, n+wn, false
	}
	fmt.Fprintln(w, line)
}
