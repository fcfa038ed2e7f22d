package stricttoml

import (
	"strings"
	"testing"
)

func TestDecodeNamesFileAndLine(t *testing.T) {
	var v struct {
		Name string `toml:"name"`
		N    int    `toml:"n"`
	}
	md, err := Decode("c.toml", []byte("name = \"a\"\nextra = 1\n"), &v)
	if err != nil || v.Name != "a" || len(md.Undecoded()) != 1 || md.Undecoded()[0].String() != "extra" {
		t.Fatalf("valid file: %+v, %v, undecoded %v", v, err, md.Undecoded())
	}
	if _, err := Decode("c.toml", []byte("name = \"a\"\nn = = 1\n"), &v); err == nil || err.Error()[:9] != "c.toml:2:" {
		t.Fatalf("syntax error: %v", err)
	}
	if _, err := Decode("c.toml", []byte("n = \"not a number\"\n"), &v); err == nil || err.Error()[:8] != "c.toml: " {
		t.Fatalf("type error: %v", err)
	}
}

func TestLine(t *testing.T) {
	data := []byte("a = 1\n[t]\nb = 2\n")
	for key, want := range map[string]int{"a": 1, "t.b": 3, "t.zz": 2, "nowhere": 1} {
		if got := Line(data, strings.Split(key, ".")); got != want {
			t.Errorf("Line(%s) = %d, want %d", key, got, want)
		}
	}
}
