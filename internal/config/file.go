package config

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// fileSetting is one `key = value` line of a config file.
type fileSetting struct {
	key, value string
	line       int
}

// readConfigFile reads `key = value` lines (flag names without dashes;
// '#' starts a comment; a bare name sets a boolean to true) from path.
func readConfigFile(path string) ([]fileSetting, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []fileSetting
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			// A bare boolean flag name means true.
			k, v = line, "true"
		}
		k = strings.TrimLeft(strings.TrimSpace(k), "-")
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		if k == "" {
			return nil, fmt.Errorf("%s:%d: no key", path, n)
		}
		out = append(out, fileSetting{key: k, value: v, line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
