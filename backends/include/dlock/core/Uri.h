// Uri.h — the URI parser's former place; it now lives in <dlock/uri.h>, beside dlock::connect().
#pragma once

#include "dlock/uri.h"
