package deploy

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image annotations and labels kiln sets.
const (
	AnnotationManifestDigest = "kiln.dev/manifest-digest"
	AnnotationKilnVersion    = "kiln.dev/kiln-version"
	AnnotationWorkflow       = "kiln.dev/workflow"
)

// Epoch is every timestamp in the image: fixed, so the same binary always
// gives the same bytes and digest (reproducible builds' SOURCE_DATE_EPOCH
// idea with a constant).
var Epoch = time.Unix(0, 0).UTC()

// CABundle is the host file the image's CA certificates come from.
const CABundle = "/etc/ssl/certs/ca-certificates.crt"

// ImageOptions tune Image; zero values are the defaults.
type ImageOptions struct {
	// CABundle overrides the CA bundle path (tests).
	CABundle string
}

// BinaryPath is where the image holds the binary.
func BinaryPath(sp *Spec) string { return "/" + sp.Name }

// Image builds the OCI image of a sealed binary: one layer on an empty
// (scratch) base with the binary and, when it makes TLS connections, the
// CA bundle; a non-root numeric user; kiln's annotations. No daemon, no
// clock: the same inputs give the same digest.
func Image(s *Seal, sp *Spec, opt ImageOptions) (v1.Image, error) {
	files := []tarFile{{path: BinaryPath(sp)[1:], mode: 0o555, data: s.Binary}}
	if sp.TLS {
		bundle := opt.CABundle
		if bundle == "" {
			bundle = CABundle
		}
		ca, err := os.ReadFile(bundle)
		if err != nil {
			return nil, fmt.Errorf("the binary makes TLS connections, so the image needs CA certificates: %v", err)
		}
		files = append(files, tarFile{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o444, data: ca})
	}
	layerTar, err := tarOf(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "kiln package", Comment: "sealed binary " + s.BinarySHA256},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: Epoch}
	cf.OS, cf.Architecture = s.GOOS, s.GOARCH
	labels := map[string]string{
		AnnotationManifestDigest: s.ManifestDigest,
		AnnotationKilnVersion:    s.Manifest.KilnVersion,
		AnnotationWorkflow:       s.Manifest.Workflow.Name,
	}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", sp.UID, sp.UID),
		Entrypoint: []string{BinaryPath(sp)},
		WorkingDir: "/",
		Labels:     labels,
	}
	if sp.TLS {
		cf.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	}
	if sp.Listens {
		cf.Config.ExposedPorts = map[string]struct{}{fmt.Sprintf("%d/tcp", sp.Port): {}}
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	ann := map[string]string{
		AnnotationManifestDigest:             s.ManifestDigest,
		AnnotationKilnVersion:                s.Manifest.KilnVersion,
		AnnotationWorkflow:                   s.Manifest.Workflow.Name,
		"org.opencontainers.image.created":   Epoch.Format(time.RFC3339),
		"org.opencontainers.image.title":     sp.Name,
		"org.opencontainers.image.base.name": "scratch",
	}
	return mutate.Annotations(img, ann).(v1.Image), nil
}

type tarFile struct {
	path string
	mode int64
	data []byte
}

// tarOf writes a layer tar with fixed owner (root), times and modes, the
// parent directories first, entries sorted by path.
func tarOf(files []tarFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	var entries []tarFile
	for _, f := range files {
		for d := filepath.Dir(f.path); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			entries = append(entries, tarFile{path: d + "/", mode: 0o755})
		}
		entries = append(entries, f)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	for _, e := range entries {
		// USTAR: no PAX records (which could carry access times).
		h := &tar.Header{Name: e.path, Mode: e.mode, ModTime: Epoch, Format: tar.FormatUSTAR}
		if e.path[len(e.path)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img as an OCI image layout in dir (tagged ref in
// its index) and, beside it, as a `docker load` tarball dir/image.tar.
func WriteLayout(dir string, img v1.Image, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %v", ref, err)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s is not empty; choose an empty output directory", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.Name(),
	})); err != nil {
		return err
	}
	return tarball.WriteToFile(filepath.Join(dir, "image.tar"), tag, img)
}

// Push uploads img to ref with the credentials of the local Docker config.
func Push(ref string, img v1.Image) (name.Digest, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("--push %q: %v", ref, err)
	}
	if err := remote.Write(r, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}
