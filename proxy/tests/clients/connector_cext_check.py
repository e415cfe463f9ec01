"""mysql-connector-python's C extension (`_mysql_connector`, over the libmysqlclient the wheel
ships) through sluice or directly: the same checks as connector_check.py.

The extension needs the OpenSSL the wheel vendors (3.2 or later, in mysql/vendor, found
through its RUNPATH). `import mysql.connector` imports Python's `ssl` before it tries the
extension, and `ssl` loads the system's libssl.so.3 (3.0 on Debian 12); the extension then
finds that library, of the same soname, already loaded, lacks OPENSSL_3.2.0 symbols, and
mysql.connector silently falls back to pure Python. Importing the extension first loads the
vendored OpenSSL, which the `ssl` module (same major version) then uses too. The transcript's
first line names the implementation, so a silent fallback shows.

Usage: connector_cext_check.py HOST PORT USER PASSWORD DATABASE
"""
import _mysql_connector  # noqa: F401  (first: see above)

import connector_check

if __name__ == "__main__":
    connector_check.main(use_pure=False)
