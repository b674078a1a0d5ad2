// Command pairs prints the two-way pairs of files of a package (see
// package filepairs): go run ./internal/testkit/filepairs/pairs ./etcdlock.
// With -v it prints the names each file of a pair uses of the other.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/fencelock/fencelock/internal/testkit/filepairs"
)

func main() {
	verbose := flag.Bool("v", false, "print the names each file uses of the other")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: pairs [-v] ./package")
		os.Exit(2)
	}
	g, err := filepairs.Load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ps := g.Pairs()
	for _, p := range ps {
		fmt.Printf("%s <-> %s (%d, %d)\n", p.A, p.B, len(p.AtoB), len(p.BtoA))
		if *verbose {
			fmt.Printf("\t%s uses %s\n\t%s uses %s\n", p.A, strings.Join(p.AtoB, " "), p.B, strings.Join(p.BtoA, " "))
		}
	}
	fmt.Printf("%d two-way pairs, %d arrows among %d files\n", len(ps), g.Arrows(), len(g))
}
