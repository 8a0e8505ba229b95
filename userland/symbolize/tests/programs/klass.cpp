// Test program for the symbolize tests: a C++ member function defined
// outside its class, with another member inlined into it.
#include <cstdio>
#include <cstdlib>

namespace ns {

class Klass {
public:
	explicit Klass(int base) : base_(base) {}
	int method(int value);

private:
	int scale(int value) const;
	int base_;
};

inline __attribute__((always_inline)) int Klass::scale(int value) const
{
	return value * base_ + (value >> 3);
}

__attribute__((noinline)) int Klass::method(int value)
{
	int total = 0;
	for (int index = 0; index < value; index++)
		total += scale(index);
	return total;
}

}  // namespace ns

int main(int argc, char **argv)
{
	ns::Klass klass(std::atoi(argv[0]) + argc);
	std::printf("%d\n", klass.method(argc * 100));
	return 0;
}
