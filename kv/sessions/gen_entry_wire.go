//go:build ignore

// gen_entry_wire.go writes entry_wire.go: go generate ./kv/sessions/.
package main

import (
	"log"
	"os"

	"github.com/sessionbus/sessionbus/kv/sessions/internal/wiregen"
)

func main() {
	src, err := wiregen.Generate("entry.go")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("entry_wire.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}
