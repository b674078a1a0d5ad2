// Command importonly imports embedetcd and prints "main ran"; with -call it
// first calls embedetcd.MaybeRunMember, as a program whose clusters
// re-execute it does. TestImportAloneIsNoMember runs it.
package main

import (
	"flag"
	"fmt"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

func main() {
	call := flag.Bool("call", false, "call embedetcd.MaybeRunMember first")
	flag.Parse()
	if *call {
		embedetcd.MaybeRunMember()
	}
	fmt.Println("main ran")
}
