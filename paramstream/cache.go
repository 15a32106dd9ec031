package paramstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve/names"
)

// Cache file layout, all integers little-endian:
//
//	offset  size  field
//	     0     8  magic "DRLPRM01" (the last two bytes are the format version)
//	     8     8  version (int64)
//	    16     8  epoch (uint64)
//	    24     8  count: number of float32 values
//	    32     4  CRC-32C of the data
//	    36     4  CRC-32C of bytes 0..35, so a damaged count or checksum
//	              is caught before it is trusted
//	    40  4*count  data, float32 little-endian
const (
	cacheMagic = "DRLPRM01"
	headerSize = 40

	// keepVersions is how many versions of the current epoch stay on
	// disk: the newest, and the one before it for a reader that looked it
	// up just before the newest landed.
	keepVersions = 2
	// tmpMaxAge is how old a temporary file must be before pruning takes
	// it for the leftover of a writer that died; a live writer finishes
	// in far less.
	tmpMaxAge = 10 * time.Minute

	lockName  = "fetch.lock"
	tmpPrefix = ".tmp-"
	fileExt   = ".params"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks a cache file that is not a valid parameter file; the
// reader removes it and fetches again.
var errCorrupt = errors.New("corrupt parameter file")

// errLocked is returned by tryLock while another process (or another
// Subscriber of this one) holds the fetch lock.
var errLocked = errors.New("fetch lock held elsewhere")

// DefaultCacheDir is the node cache directory a Subscriber uses unless
// told otherwise: $XDG_RUNTIME_DIR/distrl-params/{node}/{experiment}/{trial}/{policy},
// or, without XDG_RUNTIME_DIR, the same under os.TempDir() in a directory
// named distrl-params-{uid}, so that users of a shared node neither share
// nor block each other's caches. XDG_RUNTIME_DIR is preferred because it
// is private to the user and usually a tmpfs: the files live in memory.
// {node} is NodeName(): were the temporary directory a shared filesystem
// (or the nodes' processes see one /tmp, as network namespaces on one
// host do), nodes still keep their own caches and lock files.
func DefaultCacheDir(trial names.Trial, policy string) string {
	root := os.Getenv("XDG_RUNTIME_DIR")
	if root != "" {
		root = filepath.Join(root, "distrl-params")
	} else {
		root = filepath.Join(os.TempDir(), "distrl-params-"+strconv.Itoa(os.Getuid()))
	}
	return filepath.Join(root, pathComponent(NodeName()), pathComponent(trial.Experiment), pathComponent(trial.Trial), pathComponent(policy))
}

// NodeName names this node for its cache directory (zsock.NodeName):
// $SLURMD_NODENAME in a SLURM job, else the host name.
func NodeName() string { return zsock.NodeName() }

// pathComponent makes a name safe as one path component: separators are
// escaped, and "", "." and ".." cannot climb or collapse the tree.
func pathComponent(s string) string {
	s = url.PathEscape(s)
	if s == "" || strings.Trim(s, ".") == "" {
		s = strings.ReplaceAll(s, ".", "%2E") + "_"
	}
	return s
}

// cache is the node-local store of one policy's parameters: a directory
// of files named v{version}-{epoch}.params, written atomically, and one
// lock file that makes fetching single-flight among the processes of the
// node. Its methods are safe to call from any number of processes at once;
// the kernel's rename and flock do the coordinating.
type cache struct {
	dir  string
	made bool // dir exists (created on first need, not at start-up)
}

func fileName(version int64, epoch uint64) string {
	return fmt.Sprintf("v%d-%016x%s", version, epoch, fileExt)
}

// parseName undoes fileName; ok is false for any other name.
func parseName(name string) (version int64, epoch uint64, ok bool) {
	rest, found := strings.CutPrefix(name, "v")
	if !found {
		return 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, fileExt)
	if !found {
		return 0, 0, false
	}
	v, e, found := strings.Cut(rest, "-")
	if !found || len(e) != 16 {
		return 0, 0, false
	}
	version, err := strconv.ParseInt(v, 10, 64)
	if err != nil || version < 0 {
		return 0, 0, false
	}
	epoch, err = strconv.ParseUint(e, 16, 64)
	if err != nil {
		return 0, 0, false
	}
	return version, epoch, true
}

func (c *cache) mkdir() error {
	if c.made {
		return nil
	}
	// 0700: parameters are the user's; other users on the node have no
	// business reading or planting them.
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	c.made = true
	return nil
}

// lookup returns the newest version >= want of epoch in the cache, if any.
func (c *cache) lookup(want int64, epoch uint64) (version int64, path string, ok bool, err error) {
	entries, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("list cache directory: %w", err)
	}
	best := int64(-1)
	for _, e := range entries {
		v, ep, ok := parseName(e.Name())
		if ok && ep == epoch && v >= want && v > best {
			best = v
		}
	}
	if best < 0 {
		return 0, "", false, nil
	}
	return best, filepath.Join(c.dir, fileName(best, epoch)), true, nil
}

// read reads and checks the file at path, which must hold version of
// epoch. A file that is not what its name promises wraps errCorrupt; a
// file that vanished (pruned meanwhile) wraps fs.ErrNotExist.
func readFile(path string, version int64, epoch uint64) ([]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	var hdr [headerSize]byte
	if size < headerSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", errCorrupt, size)
	}
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: reading the header: %v", errCorrupt, err)
	}
	le := binary.LittleEndian
	switch {
	case string(hdr[:8]) != cacheMagic:
		return nil, fmt.Errorf("%w: bad magic %q", errCorrupt, hdr[:8])
	case crc32.Checksum(hdr[:36], castagnoli) != le.Uint32(hdr[36:]):
		return nil, fmt.Errorf("%w: header checksum mismatch", errCorrupt)
	}
	v, ep, count := int64(le.Uint64(hdr[8:])), le.Uint64(hdr[16:]), le.Uint64(hdr[24:])
	switch {
	case v != version || ep != epoch:
		return nil, fmt.Errorf("%w: holds version %d epoch %x, its name says %d %x", errCorrupt, v, ep, version, epoch)
	case count > uint64(size-headerSize)/4 || headerSize+4*int64(count) != size:
		// Compared with the size on disk before allocating, so a damaged
		// count cannot ask for more memory than the file has bytes.
		return nil, fmt.Errorf("%w: %d bytes for %d values", errCorrupt, size, count)
	}
	data := make([]float32, count)
	buf := rawBytes(data)
	if !hostLittleEndian {
		buf = make([]byte, 4*count)
	}
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("%w: reading the data: %v", errCorrupt, err)
	}
	if crc32.Checksum(buf, castagnoli) != le.Uint32(hdr[32:]) {
		return nil, fmt.Errorf("%w: data checksum mismatch", errCorrupt)
	}
	if !hostLittleEndian {
		for i := range data {
			data[i] = math.Float32frombits(le.Uint32(buf[4*i:]))
		}
	}
	return data, nil
}

// write stores data as version of epoch: a temporary file in the same
// directory, synced, then renamed over the final name, so a reader sees
// either no file or a complete one, never a partial write.
func (c *cache) write(version int64, epoch uint64, data []float32) (err error) {
	if err := c.mkdir(); err != nil {
		return err
	}
	buf := rawBytes(data)
	if !hostLittleEndian {
		buf = make([]byte, 0, 4*len(data))
		for _, x := range data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		}
	}
	var hdr [headerSize]byte
	le := binary.LittleEndian
	copy(hdr[:], cacheMagic)
	le.PutUint64(hdr[8:], uint64(version))
	le.PutUint64(hdr[16:], epoch)
	le.PutUint64(hdr[24:], uint64(len(data)))
	le.PutUint32(hdr[32:], crc32.Checksum(buf, castagnoli))
	le.PutUint32(hdr[36:], crc32.Checksum(hdr[:36], castagnoli))

	tmp, err := os.CreateTemp(c.dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(hdr[:]); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if _, err := tmp.Write(buf); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	// Without the sync a crash could leave the renamed file empty or
	// partial on some file systems; the checksums would catch it, but a
	// cache that is whole after a rename is cheaper than a refetch.
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	final := filepath.Join(c.dir, fileName(version, epoch))
	if err := os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("rename to %s: %w", final, err)
	}
	// The directory entry is durable once the directory is synced; a
	// failure here loses nothing but durability, so it is not reported.
	if d, err := os.Open(c.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// prune removes the files of other epochs, all but the newest
// keepVersions of epoch, and temporary files old enough to be leftovers
// of a writer that died. A reader that has a removed file open reads on
// unharmed; one that looks it up afterwards finds a newer one or fetches.
func (c *cache) prune(epoch uint64) error {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("list cache directory: %w", err)
	}
	var versions []int64
	var errs []error
	remove := func(name string) {
		if err := os.Remove(filepath.Join(c.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > tmpMaxAge {
				remove(name)
			}
			continue
		}
		v, ep, ok := parseName(name)
		switch {
		case !ok:
		case ep != epoch:
			remove(name)
		default:
			versions = append(versions, v)
		}
	}
	slices.Sort(versions)
	for len(versions) > keepVersions {
		remove(fileName(versions[0], epoch))
		versions = versions[1:]
	}
	return errors.Join(errs...)
}

// remove deletes a corrupt file so the next lookup does not find it.
func (c *cache) remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// tryLock takes the fetch lock without waiting; errLocked means another
// holder has it. The lock is an flock on an open file: the kernel drops it
// when the holder closes the file or dies, so a crashed fetcher never
// leaves the node locked.
func (c *cache) tryLock() (*os.File, error) {
	if err := c.mkdir(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(c.dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := flockTry(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// unlock releases a lock taken by tryLock. Closing the file releases the
// flock.
func unlock(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// hostLittleEndian selects the zero-copy path: on little-endian hosts the
// in-memory bytes of a []float32 are the file's bytes.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// rawBytes is the in-memory bytes of s, without copying.
func rawBytes(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}
