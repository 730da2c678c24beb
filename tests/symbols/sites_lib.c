/* tests/symbols/sites_lib.c — a shared library making calls from two known lines. */
void sl_record(int line);

__attribute__((noinline)) void lib_exchange(int n)
{
    for (int i = 0; i < n; i++)
        sl_record(__LINE__);
    sl_record(__LINE__);
}
