package deploy_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/kilnworks/kiln/gen/deploy"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// image builds the image of a sealed example with a test CA bundle.
func image(t *testing.T, name string) (*deploy.Seal, *deploy.Spec, v1.Image, []byte) {
	t.Helper()
	s, sp := spec(t, name)
	ca := []byte("-----BEGIN CERTIFICATE-----\ntest bundle of " + name + "\n-----END CERTIFICATE-----\n")
	bundle := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(bundle, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := deploy.Image(s, sp, deploy.ImageOptions{CABundle: bundle})
	if err != nil {
		t.Fatal(err)
	}
	return s, sp, img, ca
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Two builds of the same binary give the same image digest, and the
// written layouts are byte-identical.
func TestImageReproducible(t *testing.T) {
	s, sp := spec(t, "hello")
	a, err := deploy.Image(s, sp, deploy.ImageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a clock leaking into the image would change it
	b, err := deploy.Image(s, sp, deploy.ImageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, a) != digest(t, b) {
		t.Fatalf("two builds of one binary: %s and %s", digest(t, a), digest(t, b))
	}
	da, db := t.TempDir(), t.TempDir()
	if err := deploy.WriteLayout(da, a, "hello:latest"); err != nil {
		t.Fatal(err)
	}
	if err := deploy.WriteLayout(db, b, "hello:latest"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.json", "image.tar"} {
		x, _ := os.ReadFile(filepath.Join(da, f))
		y, _ := os.ReadFile(filepath.Join(db, f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs", f)
		}
	}
}

// viaLayout writes img as a layout and reads it back: the bytes a user
// gets, rather than go-containerregistry's in-memory view of a mutation.
func viaLayout(t *testing.T, img v1.Image) v1.Image {
	t.Helper()
	dir := t.TempDir()
	if err := deploy.WriteLayout(dir, img, "kiln-test:latest"); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	back, err := p.Image(digest(t, img))
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// layerFiles lists the one layer's entries.
func layerFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	var prev string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name < prev {
			t.Errorf("tar entries out of order: %s after %s", h.Name, prev)
		}
		prev = h.Name
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(deploy.Epoch) {
			t.Errorf("%s: uid %d gid %d mtime %v, want 0 0 %v", h.Name, h.Uid, h.Gid, h.ModTime, deploy.Epoch)
		}
		out[h.Name] = h
	}
	return out
}

// The image is valid, runs the binary as a non-root numeric user, carries
// kiln's annotations, and holds CA certificates only when the binary
// makes TLS connections.
func TestImageContents(t *testing.T) {
	for _, c := range []struct {
		name string
		tls  bool
	}{{"hello", false}, {"webhook", false}, {"testdata/vault", true}} {
		t.Run(filepath.Base(c.name), func(t *testing.T) {
			s, sp, img, ca := image(t, c.name)
			img = viaLayout(t, img)
			if err := validate.Image(img); err != nil {
				t.Fatalf("validate: %v", err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Config.User != "65532:65532" || cf.OS != "linux" || cf.Architecture != s.GOARCH {
				t.Errorf("user %q os %q arch %q", cf.Config.User, cf.OS, cf.Architecture)
			}
			if !strings.Contains(strings.Join(cf.Config.Entrypoint, " "), deploy.BinaryPath(sp)) {
				t.Errorf("entrypoint %v", cf.Config.Entrypoint)
			}
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if m.Annotations[deploy.AnnotationManifestDigest] != s.ManifestDigest || m.Annotations[deploy.AnnotationKilnVersion] != s.Manifest.KilnVersion {
				t.Errorf("annotations %v", m.Annotations)
			}
			files := layerFiles(t, img)
			bin := files[deploy.BinaryPath(sp)[1:]]
			if bin == nil || bin.Size != int64(len(s.Binary)) || bin.Mode != 0o555 {
				t.Errorf("binary entry %+v", bin)
			}
			certs := files["etc/ssl/certs/ca-certificates.crt"]
			if (certs != nil) != c.tls {
				t.Errorf("CA bundle in the image: %v, want %v (TLS %v)", certs != nil, c.tls, sp.TLS)
			}
			if c.tls && (certs == nil || certs.Size != int64(len(ca))) {
				t.Errorf("CA bundle entry %+v, want the host bundle's %d bytes", certs, len(ca))
			}
			want := 1
			if c.tls {
				want = 5 // etc/, etc/ssl/, etc/ssl/certs/, the bundle, the binary
			}
			if len(files) != want {
				t.Errorf("layer holds %d entries, want %d: %v", len(files), want, files)
			}
		})
	}
}

// skopeo reads the written layout and the docker-load tarball, and sees
// the digest, user and labels.
func TestImageLayoutSkopeo(t *testing.T) {
	skopeo := testtool.Command(t, "skopeo")
	s, _, img, _ := image(t, "webhook")
	dir := t.TempDir()
	if err := deploy.WriteLayout(dir, img, "webhook:test"); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("validate layout index: %v", err)
	}
	out, err := exec.Command(skopeo, "inspect", "oci:"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo inspect: %v\n%s", err, out)
	}
	var got struct {
		Digest string
		Labels map[string]string
		Os     string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Digest != digest(t, img).String() || got.Labels[deploy.AnnotationManifestDigest] != s.ManifestDigest || got.Os != "linux" {
		t.Errorf("skopeo sees %+v", got)
	}
	out, err = exec.Command(skopeo, "inspect", "--config", "oci:"+dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"User": "65532:65532"`) {
		t.Errorf("skopeo inspect --config: %v\n%s", err, out)
	}
	// The docker-load tarball holds the same image.
	out, err = exec.Command(skopeo, "inspect", "docker-archive:"+filepath.Join(dir, "image.tar")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), s.ManifestDigest) {
		t.Errorf("skopeo inspect docker-archive: %v\n%s", err, out)
	}
	stamps, err := deploy.Stamps(dir)
	if err != nil || len(stamps) != 1 || stamps[0].Digest != s.ManifestDigest {
		t.Errorf("stamps of the layout: %+v, %v", stamps, err)
	}
}

// The image is pushed to a registry on loopback, signed with the real
// cosign CLI and verified; a tag moved to another image is refused.
func TestPushSignVerify(t *testing.T) {
	cosign := testtool.CacheBin(t, "cosign")
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	if !strings.HasPrefix(host, "127.0.0.1:") {
		t.Fatalf("registry not on loopback: %s", host)
	}
	_, _, img, _ := image(t, "hello")
	ref := host + "/kiln/hello:v1"
	pushed, err := deploy.Push(ref, img)
	if err != nil {
		t.Fatal(err)
	}
	if pushed.DigestStr() != digest(t, img).String() {
		t.Fatalf("pushed %s, built %s", pushed, digest(t, img))
	}
	pulled, err := remote.Image(pushed)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(pulled); err != nil {
		t.Fatalf("validate the pushed image: %v", err)
	}

	home := t.TempDir()
	run := func(args ...string) (string, error) {
		cmd := exec.Command(cosign, args...)
		cmd.Dir = home
		cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=", "HOME="+home, "TUF_ROOT="+filepath.Join(home, "tuf"), "DOCKER_CONFIG="+filepath.Join(home, "docker"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	if out, err := run("sign", "--key", "cosign.key", "--tlog-upload=false", "--use-signing-config=false", "--allow-http-registry", "--yes", pushed.String()); err != nil {
		t.Fatalf("cosign sign: %v\n%s", err, out)
	}
	verify := func() (string, error) {
		return run("verify", "--key", "cosign.pub", "--insecure-ignore-tlog=true", "--allow-http-registry", ref)
	}
	if out, err := verify(); err != nil {
		t.Fatalf("cosign verify of the signed tag: %v\n%s", err, out)
	}

	// Move the tag to another image (same binary, one more label): the
	// signature is for the old digest, so verification must fail.
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Labels["tampered"] = "yes"
	evil, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(ref)
	if err := remote.Write(tag, evil); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(); err == nil {
		t.Fatalf("cosign verify accepted a tag moved to an unsigned image:\n%s", out)
	}
}
