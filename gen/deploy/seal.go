// Package deploy derives deployment artefacts (an OCI image, Kubernetes
// manifests, systemd units) from a sealed kiln binary. Everything comes
// from what the binary carries: its embedded manifest, its effective
// needs and its root workflow source, each found in the file without
// running it and checked against the digests the manifest records, so a
// deployment always describes the binary it ships (docs/deploy.md).
package deploy

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// maxBinary bounds what Read loads into memory: sealed binaries are a few
// MiB, so anything this large is not one.
const maxBinary = 512 << 20

// Seal is what a sealed binary says about itself.
type Seal struct {
	Path   string
	Binary []byte
	// BinarySHA256 is the hex SHA-256 of the whole file.
	BinarySHA256 string
	Manifest     *manifest.Manifest
	// ManifestDigest is "sha256:<hex>" of the embedded manifest JSON: the
	// stamp every generated artefact carries.
	ManifestDigest string
	Needs          *needs.Effective
	// Workflow is the root workflow decoded from its embedded source
	// (children are not needed: their needs are in Needs, their node
	// kinds in Manifest).
	Workflow *workflow.Workflow
	GOOS     string
	GOARCH   string
}

// Read loads a sealed binary and finds its manifest, needs and root
// workflow source. Each part must hash to the digest the manifest
// records; anything missing or mismatched is an error, never a guess.
func Read(path string) (*Seal, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBinary+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBinary {
		return nil, fmt.Errorf("%s: larger than %d MiB, not a sealed kiln binary", path, maxBinary>>20)
	}
	return parse(path, data)
}

func parse(path string, data []byte) (*Seal, error) {
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: not a Go binary with build info: %v", path, err)
	}
	raw, err := manifest.Find(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	m, err := manifest.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: embedded %v", path, err)
	}
	s := &Seal{Path: path, Binary: data, BinarySHA256: hexSum(data), Manifest: m, ManifestDigest: "sha256:" + hexSum(raw)}
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "GOOS":
			s.GOOS = kv.Value
		case "GOARCH":
			s.GOARCH = kv.Value
		}
	}
	if s.GOOS != "linux" {
		return nil, fmt.Errorf("%s: built for GOOS %q; images, Kubernetes and systemd need a linux binary", path, s.GOOS)
	}
	if m.EffectiveNeedsSHA256 == "" {
		return nil, fmt.Errorf("%s: the manifest records no effective_needs_sha256 (built by a kiln without needs); rebuild it", path)
	}
	nj, err := findJSON(data, []byte(`{"workflow":`), m.EffectiveNeedsSHA256)
	if err != nil {
		return nil, fmt.Errorf("%s: embedded effective needs: %v", path, err)
	}
	if s.Needs, err = needs.Parse(nj); err != nil {
		return nil, fmt.Errorf("%s: embedded effective needs: %v", path, err)
	}
	src, err := embeddedFile(data, "embed/workflow.toml", m.Workflow.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: embedded workflow source: %v", path, err)
	}
	if s.Workflow, err = gen.Decode("workflow.toml", src); err != nil {
		return nil, fmt.Errorf("%s: embedded workflow source: %v", path, err)
	}
	return s, nil
}

func hexSum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// findJSON returns the JSON value that starts at one of prefix's
// occurrences in data and hashes to digest (hex SHA-256).
func findJSON(data, prefix []byte, digest string) ([]byte, error) {
	for off := 0; ; off++ {
		i := bytes.Index(data[off:], prefix)
		if i < 0 {
			return nil, fmt.Errorf("none found with sha256 %s", digest)
		}
		off += i
		dec := json.NewDecoder(bytes.NewReader(data[off:]))
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			continue
		}
		if cand := data[off : off+int(dec.InputOffset())]; hexSum(cand) == digest {
			return cand, nil
		}
	}
}

// embeddedFile returns the bytes of a go:embed file of a 64-bit
// little-endian ELF binary. An embed.FS is a static table of entries
// {name string; data string; hash [16]byte}: each string a pointer and a
// length. The file's name is found in the binary, then the table entry
// pointing at it, then the data that entry points at; the data must hash
// to digest, so a wrong match can only fail, never mislead.
func embeddedFile(data []byte, name, digest string) ([]byte, error) {
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not an ELF binary: %v", err)
	}
	if ef.Class != elf.ELFCLASS64 || ef.Data != elf.ELFDATA2LSB {
		return nil, errors.New("only 64-bit little-endian binaries are supported")
	}
	var progs []*elf.Prog
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			progs = append(progs, p)
		}
	}
	toAddr := func(off int) (uint64, bool) {
		for _, p := range progs {
			if uint64(off) >= p.Off && uint64(off) < p.Off+p.Filesz {
				return p.Vaddr + uint64(off) - p.Off, true
			}
		}
		return 0, false
	}
	toOff := func(addr, n uint64) ([]byte, bool) {
		for _, p := range progs {
			if addr >= p.Vaddr && addr+n <= p.Vaddr+p.Filesz && addr+n >= addr {
				o := p.Off + addr - p.Vaddr
				return data[o : o+n], true
			}
		}
		return nil, false
	}
	le := binary.LittleEndian
	for off := 0; ; off++ {
		i := bytes.Index(data[off:], []byte(name))
		if i < 0 {
			break
		}
		off += i
		addr, ok := toAddr(off)
		if !ok {
			continue
		}
		var entry [16]byte
		le.PutUint64(entry[:8], addr)
		le.PutUint64(entry[8:], uint64(len(name)))
		for e := 0; ; e++ {
			j := bytes.Index(data[e:], entry[:])
			if j < 0 {
				break
			}
			e += j
			if e%8 != 0 || e+32 > len(data) {
				continue
			}
			ptr, n := le.Uint64(data[e+16:]), le.Uint64(data[e+24:])
			if n > maxBinary {
				continue
			}
			if b, ok := toOff(ptr, n); ok && hexSum(b) == digest {
				return b, nil
			}
		}
	}
	return nil, fmt.Errorf("no embedded %s with sha256 %s", name, digest)
}
