// The translation unit that carries the libraries' precompiled headers (CMakeLists.txt).
