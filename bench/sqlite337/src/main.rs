//! A minimal `sqlite3`-like runner built with SQLite 3.37.0 (libsqlite3-sys 0.23.2
//! bundled): `sqlite337 DB < script.sql` runs the script and prints rows `a|b|c`.
use libsqlite3_sys as ffi;
use std::ffi::{CStr, CString};
use std::io::Read;
use std::os::raw::{c_char, c_int, c_void};

unsafe extern "C" fn cb(
    _: *mut c_void,
    n: c_int,
    vals: *mut *mut c_char,
    _: *mut *mut c_char,
) -> c_int {
    let mut out = Vec::new();
    for i in 0..n as isize {
        let p = *vals.offset(i);
        out.push(if p.is_null() {
            String::new()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        });
    }
    println!("{}", out.join("|"));
    0
}

fn main() {
    let db = std::env::args().nth(1).expect("DB");
    let mut sql = String::new();
    std::io::stdin().read_to_string(&mut sql).unwrap();
    unsafe {
        eprintln!(
            "sqlite {}",
            CStr::from_ptr(ffi::sqlite3_libversion()).to_string_lossy()
        );
        let mut conn = std::ptr::null_mut();
        let path = CString::new(db).unwrap();
        let rc = ffi::sqlite3_open_v2(
            path.as_ptr(),
            &mut conn,
            ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE | ffi::SQLITE_OPEN_URI,
            std::ptr::null(),
        );
        if rc != 0 {
            eprintln!("open failed {rc}");
            std::process::exit(1);
        }
        let s = CString::new(sql).unwrap();
        let mut err: *mut c_char = std::ptr::null_mut();
        let rc = ffi::sqlite3_exec(conn, s.as_ptr(), Some(cb), std::ptr::null_mut(), &mut err);
        if rc != 0 {
            eprintln!("Error: {}", CStr::from_ptr(err).to_string_lossy());
            std::process::exit(1);
        }
    }
}
