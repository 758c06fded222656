package web

import "github.com/countersign/countersign/static"

func staticFile(name string) ([]byte, error) { return static.Files.ReadFile(name) }
