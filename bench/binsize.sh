#!/usr/bin/env bash
# What the shipped binary weighs, and which modules the weight is: builds
# cmd/countersign as the Dockerfile does (-s -w) and once unstripped, then
# sums the sizes of code and data symbols (go tool nm) per module of
# go version -m. Symbols of the standard library and the runtime are one
# line; pclntab and other tables no symbol owns are not counted.
# Run from the repository's root: bash bench/binsize.sh
set -euo pipefail
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -trimpath -ldflags "-s -w" -o "$out/stripped" ./cmd/countersign
go build -trimpath -o "$out/full" ./cmd/countersign
printf 'shipped (-s -w): %d bytes (%.1f MB)\n' "$(stat -c %s "$out/stripped")" "$(echo "$(stat -c %s "$out/stripped") / 1000000" | bc -l)"
printf 'unstripped:      %d bytes (%.1f MB)\n' "$(stat -c %s "$out/full")" "$(echo "$(stat -c %s "$out/full") / 1000000" | bc -l)"
go version -m "$out/full" | awk '$1=="dep"{print $2}' >"$out/mods"
go tool nm -size "$out/full" | awk '
	NR == FNR { mods[++n] = $1; next }
	$3 ~ /^[TtRrDd]$/ && $4 != "crypto/internal/fips140/drbg.memory" {
		name = $4; gsub(/^type:\*?|^go:(itab\.)?\*?/, "", name)
		owner = ""
		for (i = 1; i <= n; i++)
			if ((index(name, mods[i] ".") == 1 || index(name, mods[i] "/") == 1) && length(mods[i]) > length(owner))
				owner = mods[i]
		if (owner == "") owner = (name ~ /^github.com\/countersign\//) ? "countersign (ours)" : "standard library, runtime, unattributed"
		size[owner] += $2; total += $2
	}
	END {
		for (k in size) if (size[k] >= 100000) printf "%7.2f MB %5.1f%%  %s\n", size[k] / 1e6, 100 * size[k] / total, k
		printf "%7.2f MB        symbols counted\n", total / 1e6
	}' "$out/mods" - | sort -rn
