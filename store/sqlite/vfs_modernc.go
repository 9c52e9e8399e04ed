//go:build !belay_cgo

package sqlite

import (
	"encoding/binary"
	"errors"
	"sync"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// walVFSName names the VFS every connection opens the database through. It is
// SQLite's own VFS (unix, on Linux), except for the files of write-ahead logs:
// SQLite writes each frame of a commit with two writes, its 24-byte header and
// its page, and this VFS gathers a commit's frames and writes them with one
// (see walFile). A save's commit of 13 frames made 26 system calls; it makes one.
const walVFSName = "belay-wal"

// walFile is an open write-ahead log. SQLite allocates it (szOsFile of the VFS)
// and sees only its first field, pMethods; the file of SQLite's own VFS
// follows it in the same allocation, at walFileSize.
//
// Writes are gathered while each begins where the one before ended, and
// written when the page of a commit frame (a frame whose header names the
// database's size) is in, so a commit returns with all its frames in the file,
// as without this VFS. Any other use of the file (a read, a sync, a size, a
// truncate, a close, a write elsewhere) writes what is gathered first, so SQLite
// and other connections never see the file otherwise than SQLite wrote it. A
// failed write of the gathered frames is the error of the call that made it,
// which for a commit is the commit's: SQLite then rolls the transaction back,
// and the frames written are past the log's end, as after any failed commit.
type walFile struct {
	pMethods uintptr // walMethods
	buf      uintptr // gathered bytes, C memory
	len, cap int64
	off      int64 // file offset of buf's first byte
	// commitHeader: the last write was a commit frame's header, so the next
	// is that frame's page and ends the commit.
	commitHeader bool
}

const (
	walFileSize = (unsafe.Sizeof(walFile{}) + 7) &^ 7
	// walFrameHeader is the size of a frame's header in the log.
	walFrameHeader = 24
	// walGatherMax bounds what is gathered: a transaction that writes more
	// (one that spills pages before its commit) writes it in parts this big.
	walGatherMax = 1 << 20
	// walWriteMax bounds one write of SQLite's VFS, which writes at most
	// 128 KiB - 1 bytes a call (it masks the length with 0x1ffff).
	walWriteMax = 1 << 16
	sqliteOK    = 0
)

var (
	walVFSOnce sync.Once
	walVFSErr  error
	// realVFS is SQLite's default VFS, which does the work.
	realVFS uintptr
	// walMethods is the method table of walFile, in C memory.
	walMethods uintptr
)

// registerWALVFS registers the VFS with SQLite, once per process.
func registerWALVFS() error {
	walVFSOnce.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		realVFS = sqlite3.Xsqlite3_vfs_find(tls, 0)
		if realVFS == 0 {
			walVFSErr = errors.New("sqlite: no default VFS")
			return
		}
		name, err := libc.CString(walVFSName)
		if err != nil {
			walVFSErr = err
			return
		}
		m := libc.Xmalloc(tls, libc.Tsize_t(unsafe.Sizeof(sqlite3.Tsqlite3_io_methods{})))
		v := libc.Xmalloc(tls, libc.Tsize_t(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
		if m == 0 || v == 0 {
			walVFSErr = errors.New("sqlite: out of memory registering the VFS")
			return
		}
		*ptr[sqlite3.Tsqlite3_io_methods](m) = sqlite3.Tsqlite3_io_methods{
			FiVersion:               3,
			FxClose:                 cfunc(walClose),
			FxRead:                  cfunc(walRead),
			FxWrite:                 cfunc(walWrite),
			FxTruncate:              cfunc(walTruncate),
			FxSync:                  cfunc(walSyncFile),
			FxFileSize:              cfunc(walFileSizeOf),
			FxLock:                  cfunc(walLock),
			FxUnlock:                cfunc(walUnlock),
			FxCheckReservedLock:     cfunc(walCheckReservedLock),
			FxFileControl:           cfunc(walFileControl),
			FxSectorSize:            cfunc(walSectorSize),
			FxDeviceCharacteristics: cfunc(walDeviceCharacteristics),
			FxShmMap:                cfunc(walShmMap),
			FxShmLock:               cfunc(walShmLock),
			FxShmBarrier:            cfunc(walShmBarrier),
			FxShmUnmap:              cfunc(walShmUnmap),
			FxFetch:                 cfunc(walFetch),
			FxUnfetch:               cfunc(walUnfetch),
		}
		walMethods = m
		vfs := ptr[sqlite3.Tsqlite3_vfs](v)
		*vfs = *ptr[sqlite3.Tsqlite3_vfs](realVFS)
		vfs.FszOsFile += int32(walFileSize)
		vfs.FpNext = 0
		vfs.FzName = name
		vfs.FxOpen = cfunc(walOpen)
		if rc := sqlite3.Xsqlite3_vfs_register(tls, v, 0); rc != sqliteOK {
			walVFSErr = errors.New("sqlite: register the VFS failed")
		}
	})
	return walVFSErr
}

// cfunc returns a Go function as the C function pointer of the SQLite
// translation: the address of its func value. f must be a top-level function,
// whose func value is static.
func cfunc[F any](f F) uintptr { return *(*uintptr)(unsafe.Pointer(&f)) }

// ptr returns the address p of memory outside Go's heap (SQLite's, from its
// allocator) as a Go pointer.
func ptr[T any](p uintptr) *T { return *(**T)(unsafe.Pointer(&p)) }

// inner returns the file of SQLite's own VFS inside a walFile, and its methods.
func inner(pFile uintptr) (uintptr, *sqlite3.Tsqlite3_io_methods) {
	r := pFile + walFileSize
	return r, ptr[sqlite3.Tsqlite3_io_methods](ptr[sqlite3.Tsqlite3_file](r).FpMethods)
}

func walOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	rv := ptr[sqlite3.Tsqlite3_vfs](realVFS)
	open := *(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&rv.FxOpen))
	if flags&sqlite3.SQLITE_OPEN_WAL == 0 {
		// Any other file is SQLite's own, in the same allocation.
		return open(tls, realVFS, zName, pFile, flags, pOutFlags)
	}
	f := ptr[walFile](pFile)
	*f = walFile{}
	if rc := open(tls, realVFS, zName, pFile+walFileSize, flags, pOutFlags); rc != sqliteOK {
		return rc
	}
	f.pMethods = walMethods
	return sqliteOK
}

// flush writes what f gathered.
func (f *walFile) flush(tls *libc.TLS, pFile uintptr) int32 {
	if f.len == 0 {
		return sqliteOK
	}
	r, m := inner(pFile)
	write := *(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&m.FxWrite))
	n := f.len
	f.len, f.commitHeader = 0, false
	for done := int64(0); done < n; done += walWriteMax {
		if rc := write(tls, r, f.buf+uintptr(done), int32(min(n-done, walWriteMax)), f.off+done); rc != sqliteOK {
			return rc
		}
	}
	return sqliteOK
}

func walWrite(tls *libc.TLS, pFile, pBuf uintptr, amt int32, off int64) int32 {
	f := ptr[walFile](pFile)
	if f.len > 0 && off != f.off+f.len {
		if rc := f.flush(tls, pFile); rc != sqliteOK {
			return rc
		}
	}
	if f.len+int64(amt) > f.cap {
		c := max(2*f.cap, 64<<10, f.len+int64(amt))
		b := libc.Xrealloc(tls, f.buf, libc.Tsize_t(c))
		if b == 0 {
			return sqlite3.SQLITE_NOMEM
		}
		f.buf, f.cap = b, c
	}
	if f.len == 0 {
		f.off = off
	}
	src := unsafe.Slice(ptr[byte](pBuf), amt)
	copy(unsafe.Slice(ptr[byte](f.buf+uintptr(f.len)), amt), src)
	f.len += int64(amt)
	ends := f.commitHeader
	// A frame's header holds the database's size after the commit in bytes
	// 4-7 when the frame ends a commit, 0 otherwise.
	f.commitHeader = amt == walFrameHeader && binary.BigEndian.Uint32(src[4:8]) != 0
	if ends || f.len >= walGatherMax {
		return f.flush(tls, pFile)
	}
	return sqliteOK
}

func walClose(tls *libc.TLS, pFile uintptr) int32 {
	f := ptr[walFile](pFile)
	rc := f.flush(tls, pFile)
	libc.Xfree(tls, f.buf)
	f.buf, f.cap = 0, 0
	r, m := inner(pFile)
	closeRC := (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&m.FxClose)))(tls, r)
	if rc != sqliteOK {
		return rc
	}
	return closeRC
}

func walRead(tls *libc.TLS, pFile, pBuf uintptr, amt int32, off int64) int32 {
	if rc := ptr[walFile](pFile).flush(tls, pFile); rc != sqliteOK {
		return rc
	}
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&m.FxRead)))(tls, r, pBuf, amt, off)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	if rc := ptr[walFile](pFile).flush(tls, pFile); rc != sqliteOK {
		return rc
	}
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&m.FxTruncate)))(tls, r, size)
}

func walSyncFile(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	if rc := ptr[walFile](pFile).flush(tls, pFile); rc != sqliteOK {
		return rc
	}
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&m.FxSync)))(tls, r, flags)
}

func walFileSizeOf(tls *libc.TLS, pFile, pSize uintptr) int32 {
	if rc := ptr[walFile](pFile).flush(tls, pFile); rc != sqliteOK {
		return rc
	}
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&m.FxFileSize)))(tls, r, pSize)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	if rc := ptr[walFile](pFile).flush(tls, pFile); rc != sqliteOK {
		return rc
	}
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&m.FxFileControl)))(tls, r, op, pArg)
}

func walFetch(tls *libc.TLS, pFile uintptr, off int64, amt int32, pp uintptr) int32 {
	if rc := ptr[walFile](pFile).flush(tls, pFile); rc != sqliteOK {
		return rc
	}
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int64, int32, uintptr) int32)(unsafe.Pointer(&m.FxFetch)))(tls, r, off, amt, pp)
}

// The rest pass through: they neither read nor write the file's bytes.

func walLock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&m.FxLock)))(tls, r, lock)
}

func walUnlock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&m.FxUnlock)))(tls, r, lock)
}

func walCheckReservedLock(tls *libc.TLS, pFile, pResOut uintptr) int32 {
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&m.FxCheckReservedLock)))(tls, r, pResOut)
}

func walSectorSize(tls *libc.TLS, pFile uintptr) int32 {
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&m.FxSectorSize)))(tls, r)
}

func walDeviceCharacteristics(tls *libc.TLS, pFile uintptr) int32 {
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&m.FxDeviceCharacteristics)))(tls, r)
}

func walShmMap(tls *libc.TLS, pFile uintptr, region, size, extend int32, pp uintptr) int32 {
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int32, int32, int32, uintptr) int32)(unsafe.Pointer(&m.FxShmMap)))(tls, r, region, size, extend, pp)
}

func walShmLock(tls *libc.TLS, pFile uintptr, offset, n, flags int32) int32 {
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&m.FxShmLock)))(tls, r, offset, n, flags)
}

func walShmBarrier(tls *libc.TLS, pFile uintptr) {
	r, m := inner(pFile)
	(*(*func(*libc.TLS, uintptr))(unsafe.Pointer(&m.FxShmBarrier)))(tls, r)
}

func walShmUnmap(tls *libc.TLS, pFile uintptr, deleteFlag int32) int32 {
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&m.FxShmUnmap)))(tls, r, deleteFlag)
}

func walUnfetch(tls *libc.TLS, pFile uintptr, off int64, p uintptr) int32 {
	r, m := inner(pFile)
	return (*(*func(*libc.TLS, uintptr, int64, uintptr) int32)(unsafe.Pointer(&m.FxUnfetch)))(tls, r, off, p)
}
