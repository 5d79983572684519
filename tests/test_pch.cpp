// The translation unit that builds the tests' precompiled headers (tests/CMakeLists.txt: draftlab_base_test_pch,
// draftlab_test_pch); the header lists are there. Nothing is defined here.
