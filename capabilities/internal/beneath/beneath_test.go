package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kilnworks/kiln/capabilities/internal/beneath/beneathtest"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// both runs f once with openat2 and once with the component walk.
func both(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", func(t *testing.T) {
		fd, err := unix.Openat2(unix.AT_FDCWD, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
		if err == unix.ENOSYS {
			testtool.Missing(t, "this kernel has no openat2; only the walk is tested")
		}
		if err == nil {
			unix.Close(fd)
		}
		f(t)
		if walkOnly.Load() {
			t.Fatal("Open fell back to the walk")
		}
	})
	t.Run("walk", func(t *testing.T) {
		walkOnly.Store(true)
		t.Cleanup(func() { walkOnly.Store(false) })
		f(t)
	})
}

type tree struct{ root, outside string }

// makeTree builds root/{file, sub/inner, links...} and outside/secret.
func makeTree(t *testing.T) tree {
	t.Helper()
	base := t.TempDir()
	tr := tree{root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	must(t, os.MkdirAll(filepath.Join(tr.root, "sub"), 0o755))
	must(t, os.Mkdir(tr.outside, 0o755))
	must(t, os.WriteFile(filepath.Join(tr.root, "file"), []byte("inside"), 0o644))
	must(t, os.WriteFile(filepath.Join(tr.root, "sub", "inner"), []byte("inner"), 0o644))
	must(t, os.WriteFile(filepath.Join(tr.outside, "secret"), []byte("SECRET"), 0o644))
	links := map[string]string{
		"rel-in":     "sub/inner",                    // stays inside
		"sub/up-in":  "../file",                      // climbs, but stays inside
		"dir-in":     "sub",                          // a directory inside
		"abs-in":     filepath.Join(tr.root, "file"), // absolute, even to inside
		"rel-out":    "../outside/secret",
		"sub/up-out": "../../outside/secret",
		"abs-out":    filepath.Join(tr.outside, "secret"),
		"dir-out":    "../outside",
		"magic":      "/proc/self/root" + filepath.Join(tr.outside, "secret"),
		"loop":       "loop",
	}
	for name, target := range links {
		must(t, os.Symlink(target, filepath.Join(tr.root, name)))
	}
	return tr
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func openDir(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func read(t *testing.T, dirfd int, name string) (string, error) {
	t.Helper()
	fd, err := Open(dirfd, name, unix.O_RDONLY)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	buf := make([]byte, 64)
	n, err := f.Read(buf)
	return string(buf[:n]), err
}

func TestOpen(t *testing.T) {
	both(t, func(t *testing.T) {
		tr := makeTree(t)
		root := openDir(t, tr.root)
		for name, want := range map[string]string{
			"file": "inside", "sub/inner": "inner", "./sub//inner": "inner", "sub/../file": "inside",
			"rel-in": "inner", "sub/up-in": "inside", "dir-in/inner": "inner",
		} {
			if got, err := read(t, root, name); err != nil || got != want {
				t.Errorf("%s: %q, %v; want %q", name, got, err, want)
			}
		}
		for _, name := range []string{"..", "../outside/secret", "sub/../../outside/secret", tr.root + "/file",
			"abs-in", "rel-out", "sub/up-out", "abs-out", "dir-out/secret"} {
			if got, err := read(t, root, name); !errors.Is(err, ErrOutside) {
				t.Errorf("%s: %q, %v; want ErrOutside", name, got, err)
			}
		}
		// Magic links: the link in the tree, and /proc's own links used
		// beneath /proc, jump nowhere.
		if got, err := read(t, root, "magic"); !errors.Is(err, ErrOutside) {
			t.Errorf("magic: read %q, %v", got, err)
		}
		secret, err := os.Open(filepath.Join(tr.outside, "secret"))
		must(t, err)
		defer secret.Close()
		proc := openDir(t, "/proc")
		for _, name := range []string{"self/root" + tr.outside + "/secret", "self/fd/" + strconv.Itoa(int(secret.Fd())), "thread-self/cwd/beneath.go"} {
			if got, err := read(t, proc, name); err != unix.ELOOP && !errors.Is(err, ErrOutside) {
				t.Errorf("/proc/%s: read %q, %v", name, got, err)
			}
		}
		if _, err := read(t, root, "loop"); err != unix.ELOOP {
			t.Errorf("loop: %v", err)
		}
		if _, err := read(t, root, "missing"); err != unix.ENOENT {
			t.Errorf("missing: %v", err)
		}
		if _, err := Open(root, "file/x", unix.O_RDONLY); err != unix.ENOTDIR {
			t.Errorf("file/x: %v", err)
		}
		// The directory itself, and Path of what was opened.
		fd, err := Open(root, "", unix.O_PATH|unix.O_DIRECTORY)
		must(t, err)
		defer unix.Close(fd)
		if p, err := Path(fd); err != nil || p != tr.root {
			t.Errorf("Path = %q, %v", p, err)
		}
		fd2, err := Open(root, "dir-in", unix.O_PATH|unix.O_DIRECTORY)
		must(t, err)
		defer unix.Close(fd2)
		if p, err := Path(fd2); err != nil || p != filepath.Join(tr.root, "sub") {
			t.Errorf("Path = %q, %v", p, err)
		}
	})
}

func TestMkdirAll(t *testing.T) {
	both(t, func(t *testing.T) {
		tr := makeTree(t)
		root := openDir(t, tr.root)
		var asked []string
		allow := func(p string) error { asked = append(asked, p); return nil }
		fd, err := MkdirAll(root, "sub/a/b", 0o755, allow)
		must(t, err)
		p, _ := Path(fd)
		unix.Close(fd)
		if want := filepath.Join(tr.root, "sub/a/b"); p != want {
			t.Fatalf("made %q, want %q", p, want)
		}
		if len(asked) != 2 || asked[0] != filepath.Join(tr.root, "sub/a") || asked[1] != filepath.Join(tr.root, "sub/a/b") {
			t.Fatalf("asked %v", asked)
		}
		// Existing: nothing asked. Refused: nothing made.
		asked = nil
		fd, err = MkdirAll(root, "sub/a", 0o755, allow)
		must(t, err)
		unix.Close(fd)
		if len(asked) != 0 {
			t.Fatalf("asked %v for an existing directory", asked)
		}
		no := errors.New("no")
		if _, err := MkdirAll(root, "sub/c/d", 0o755, func(string) error { return no }); err != no {
			t.Fatalf("refused: %v", err)
		}
		if _, err := os.Stat(filepath.Join(tr.root, "sub/c")); !os.IsNotExist(err) {
			t.Fatal("a refused directory was made")
		}
		// Through a link out: refused, nothing made outside.
		for _, name := range []string{"dir-out/new", "abs-out/new", "../new"} {
			if _, err := MkdirAll(root, name, 0o755, allow); !errors.Is(err, ErrOutside) {
				t.Errorf("%s: %v", name, err)
			}
		}
		if entries, _ := os.ReadDir(tr.outside); len(entries) != 1 {
			t.Fatalf("outside holds %v", entries)
		}
		if _, err := MkdirAll(root, "file/x", 0o755, allow); err != unix.ENOTDIR {
			t.Fatalf("file/x: %v", err)
		}
	})
}

// A name flipped between a file and a link out while it is opened never
// yields the outside file's content.
func TestOpenRace(t *testing.T) {
	both(t, func(t *testing.T) {
		tr := makeTree(t)
		root := openDir(t, tr.root)
		x, alt := filepath.Join(tr.root, "x"), filepath.Join(tr.root, "alt")
		must(t, os.WriteFile(x, []byte("inside"), 0o644))
		must(t, os.Symlink("../outside/secret", alt))
		stop := beneathtest.Swap(t, x, alt)
		ok := 0
		for range 5000 {
			got, err := read(t, root, "x")
			if got == "SECRET" {
				stop()
				t.Fatal("read the outside file")
			}
			if err == nil {
				ok++
			}
		}
		stop()
		if ok == 0 {
			t.Fatal("no read succeeded: the race was not exercised")
		}
	})
}
