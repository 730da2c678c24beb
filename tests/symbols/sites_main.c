/* tests/symbols/sites_main.c — a program with call sites on known lines: two in main, one
 * in a static function, and the shared library's two. */
void sl_record(int line);
void lib_exchange(int n);

__attribute__((noinline)) static void halo(void)
{
    sl_record(__LINE__);
}

int main(void)
{
    sl_record(__LINE__);
    halo();
    lib_exchange(1);
    sl_record(__LINE__); /* same op, another site */
    return 0;
}
