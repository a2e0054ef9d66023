#include <stdio.h>

struct request { const char *url; int retries; };

int send_request(struct request *r) {
    return r->timeout_ms > 0;
}

int main(void) {
    struct request r = { "http://localhost", 3 };
    printf("%d\n", send_request(&r, 1));
    return undefined_status;
}
