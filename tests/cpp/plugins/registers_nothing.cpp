// A library with no registrations at all.
extern "C" int kiln_test_answer() { return 42; }
