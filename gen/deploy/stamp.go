package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Stamp is the manifest digest one generated file says it came from.
type Stamp struct {
	File   string
	Digest string // "sha256:<hex>"
}

var stampLine = regexp.MustCompile(`^# kiln\.dev/manifest-digest: (sha256:[0-9a-f]{64})$`)

// Stamps reads the manifest digests stamped into generated files: the
// header line of each Kubernetes, Cilium or systemd file, and the
// annotation of each image of an OCI layout. path is one file or a
// directory (its files, and its images when it is an OCI layout).
func Stamps(path string) ([]Stamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		s, ok, err := fileStamp(path)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%s: no kiln.dev/manifest-digest stamp", path)
		}
		return []Stamp{s}, nil
	}
	var out []Stamp
	if _, err := os.Stat(filepath.Join(path, "index.json")); err == nil {
		ls, err := layoutStamps(path)
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		s, ok, err := fileStamp(filepath.Join(path, e.Name()))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no file with a kiln.dev/manifest-digest stamp", path)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

// fileStamp finds the stamp line among the first lines of a text file.
func fileStamp(path string) (Stamp, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return Stamp{}, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for i := 0; i < 10 && sc.Scan(); i++ {
		if m := stampLine.FindSubmatch(bytes.TrimRight(sc.Bytes(), "\r")); m != nil {
			return Stamp{File: path, Digest: string(m[1])}, true, nil
		}
	}
	return Stamp{}, false, nil
}

// layoutStamps reads the kiln annotation of every image in an OCI layout.
func layoutStamps(dir string) ([]Stamp, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dir, err)
	}
	var out []Stamp
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: image %s: %v", dir, d.Digest, err)
		}
		m, err := img.Manifest()
		if err != nil {
			return nil, fmt.Errorf("%s: image %s: %v", dir, d.Digest, err)
		}
		if v, ok := m.Annotations[AnnotationManifestDigest]; ok {
			out = append(out, Stamp{File: filepath.Join(dir, "blobs", d.Digest.Algorithm, d.Digest.Hex), Digest: v})
		}
	}
	return out, nil
}

// WriteFiles writes generated files into dir, refusing to replace any
// file already there (an operator's edits are never overwritten).
func WriteFiles(dir string, files []File) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var wrote []string
	for _, f := range files {
		p := filepath.Join(dir, f.Name)
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			if os.IsExist(err) {
				return wrote, fmt.Errorf("%s already exists; choose an empty output directory", p)
			}
			return wrote, err
		}
		_, err = fh.Write(f.Data)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return wrote, err
		}
		wrote = append(wrote, p)
	}
	return wrote, nil
}
